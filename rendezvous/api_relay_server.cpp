// See api_relay_server.h.
#include "rendezvous/api_relay_server.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "common/http_client.h"
#include "common/json_fields.h"
#include "common/proof.h"
#include "common/utf8.h"

namespace tmpi::rdv {

namespace {

long long unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Reply answer(int status, bool recorded, const std::string& why) {
  nlohmann::json body = {{"recorded", recorded}};
  if (!why.empty()) body["why"] = why;
  return Reply{status, dump_json(body), "application/json"};
}

}  // namespace

ApiRelay::ApiRelay(const std::string& private_key, ForwardEvent forward, std::function<long long()> clock_ms)
    : key_(derive_rendezvous_key(private_key)),
      forward_(std::move(forward)),
      clock_ms_(clock_ms ? std::move(clock_ms) : unix_ms) {}

ApiRelay::~ApiRelay() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

Reply ApiRelay::handle(const Call& call) {
  if (!from_inside_pod(call)) return answer(403, false, "the relay serves its own pod's loopback only");
  if (call.method == "POST" && call.target == kRelayPodsPath && list_pods_) return handle_pods(call);
  if (call.method != "POST" || call.target != kRelayEventPath)
    return answer(404, false, std::string("the relay serves POST ") + kRelayEventPath + " only");
  const long long now = clock_ms_();
  auto read = read_relay_event(key_, call.body, now, nonces_);
  if (auto* refusal = std::get_if<RelayRefusal>(&read)) {
    spdlog::warn("api relay: refused a request ({}): {}", refusal->status, refusal->why);
    return answer(refusal->status, false, refusal->why);
  }
  const RelayedEvent& event = std::get<RelayedEvent>(read);
  if (std::string held = limiter_.admit(event, now); !held.empty()) return answer(429, false, held);
  std::string why = forward_(event);
  if (!why.empty()) return answer(502, false, why);
  spdlog::info("api relay: {} recorded on the TrainJob", event.reason);
  return answer(201, true, "");
}

Reply ApiRelay::handle_pods(const Call& call) {
  const long long now = clock_ms_();
  auto read = read_relay_pods(key_, call.body, now, nonces_);
  if (auto* refusal = std::get_if<RelayRefusal>(&read)) {
    spdlog::warn("api relay: refused a pods request ({}): {}", refusal->status, refusal->why);
    return answer(refusal->status, false, refusal->why);
  }
  if (std::string held = pod_limiter_.admit(now); !held.empty()) return answer(429, false, held);
  RelayedPods listed = list_pods_(std::get<std::vector<std::string>>(read));
  if (listed.outcome == RelayedPods::Outcome::kListed)
    return Reply{200, dump_json(pod_statuses_json(listed.pods)), "application/json"};
  nlohmann::json body = {{"apiRefused", listed.outcome == RelayedPods::Outcome::kRefused},
                         {"why", truncate_utf8(listed.why, 1024, "...")}};
  return Reply{502, dump_json(body), "application/json"};
}

Expected<unsigned short> ApiRelay::start(const std::string& address, unsigned short port) {
  ServerLimits limits;
  limits.max_connections = 64;              // the launcher holds one at a time; the loopback has no strangers
  limits.body_bytes = kRelayPodsBodyBytes;  // the larger request; an Event's own bound is checked after
  server_ = std::make_unique<HttpServer>(
      io_, [this](const Call& call, const Respond& respond) { respond(handle(call)); }, limits);
  TMPI_ASSIGN(unsigned short bound, server_->listen(address, port));
  thread_ = std::jthread([this] { io_.run(); });
  return bound;
}

Expected<RelayAnswer> relay_event(unsigned short port, std::string_view rendezvous_key,
                                  const RelayedEvent& event, Millis timeout) {
  HttpClient client{TlsConfig{}};
  HttpRequest request{"POST",
                      fmt::format("http://127.0.0.1:{}{}", port, kRelayEventPath),
                      relay_event_body(rendezvous_key, event, random_nonce(), unix_ms()),
                      {"Content-Type: application/json"},
                      timeout,
                      "",
                      std::size_t{16} << 10};
  TMPI_ASSIGN(HttpResponse response, client.send(request));
  nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
  RelayAnswer answer;
  answer.recorded =
      response.status == 201 && body.is_object() && body.contains("recorded") && body["recorded"] == true;
  if (!answer.recorded) {
    std::string why = body.is_object() ? string_at(body, "/why") : "";
    answer.why =
        fmt::format("HTTP {}: {}", response.status,
                    why.empty() ? truncate_utf8(response.body, 200, "...") : truncate_utf8(why, 1024, "..."));
  }
  return answer;
}

}  // namespace tmpi::rdv

namespace tmpi::rdv {

Expected<RelayedPods> relay_pods(unsigned short port, std::string_view rendezvous_key,
                                 const std::vector<std::string>& hosts, Millis timeout) {
  HttpClient client{TlsConfig{}};
  std::vector<std::string> asked = hosts;
  if (asked.size() > kPodStatusHosts) asked.resize(kPodStatusHosts);
  HttpRequest request{"POST",
                      fmt::format("http://127.0.0.1:{}{}", port, kRelayPodsPath),
                      relay_pods_body(rendezvous_key, asked, random_nonce(), unix_ms()),
                      {"Content-Type: application/json"},
                      timeout,
                      "",
                      kPodStatusAnswerBytes};
  TMPI_ASSIGN(HttpResponse response, client.send(request));
  RelayedPods out;
  if (response.status == 200) {
    auto pods = read_pod_statuses(response.body);
    if (!pods) {
      out.why = pods.error().message;
      return out;
    }
    out.outcome = RelayedPods::Outcome::kListed;
    out.pods = std::move(*pods);
    return out;
  }
  nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
  const bool refused = body.is_object() && body.contains("apiRefused") && body["apiRefused"] == true;
  std::string why = body.is_object() ? string_at(body, "/why") : "";
  out.outcome = refused ? RelayedPods::Outcome::kRefused : RelayedPods::Outcome::kFailed;
  out.why =
      fmt::format("HTTP {}: {}", response.status,
                  why.empty() ? truncate_utf8(response.body, 200, "...") : truncate_utf8(why, 1024, "..."));
  return out;
}

}  // namespace tmpi::rdv

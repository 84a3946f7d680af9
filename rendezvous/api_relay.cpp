// See api_relay.h.
#include "rendezvous/api_relay.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/pod_status.h"

namespace tmpi::rdv {

namespace {

constexpr std::string_view kProofLabel = "api-event|";

std::string proof_over(std::string_view key, const nlohmann::json& unsigned_body) {
  return hmac_hex(key, std::string(kProofLabel) + dump_json(unsigned_body));
}

bool is_hex(const std::string& text, std::size_t length) {
  return text.size() == length && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// An Event reason as the API's own: a letter, then letters and digits, at most 128.
bool is_reason(const std::string& text) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto alnum = [&](char c) { return letter(c) || (c >= '0' && c <= '9'); };
  return !text.empty() && text.size() <= 128 && letter(text[0]) &&
         std::all_of(text.begin(), text.end(), alnum);
}

RelayRefusal bad_shape(const std::string& why) {
  return {400, why + "; a relayed Event is {type, reason, message, nonce, sentAt, proof}"};
}

}  // namespace

std::string relay_event_body(std::string_view rendezvous_key, const RelayedEvent& event,
                             const std::string& nonce, long long sent_at_ms) {
  nlohmann::json body = {{"type", event.type},
                         {"reason", event.reason},
                         {"message", event.message},
                         {"nonce", nonce},
                         {"sentAt", sent_at_ms}};
  body["proof"] = proof_over(rendezvous_key, body);
  return dump_json(body);
}

bool NonceWindow::take(const std::string& nonce, long long now_ms) {
  const long long oldest = now_ms - 2 * kRelayFreshness.count();  // a nonce is valid ±window
  while (!order_.empty() && order_.front().first < oldest) {
    seen_.erase(order_.front().second);
    order_.pop_front();
  }
  if (seen_.size() >= kMaxNonces || seen_.contains(nonce)) return false;
  seen_.insert(nonce);
  order_.emplace_back(now_ms, nonce);
  return true;
}

namespace {

constexpr std::string_view kPodsProofLabel = "api-pods|";

// The checks every signed request shares: the proof under `label` (after the fields' types)...
std::optional<RelayRefusal> refuse_proof(std::string_view key, std::string_view label,
                                         const nlohmann::json& request) {
  const std::string nonce = request["nonce"], proof = request["proof"];
  if (!is_hex(proof, 64) || !is_hex(nonce, 32))
    return RelayRefusal{400, "\"proof\" or \"nonce\" is not lower-case hex"};
  nlohmann::json unsigned_body = request;
  unsigned_body.erase("proof");
  if (!proof_matches(hmac_hex(key, std::string(label) + dump_json(unsigned_body)), proof))
    return RelayRefusal{403, "the proof does not hold under this job's key"};
  return std::nullopt;
}

// ... and, after the content's, freshness and the nonce (taken last: a refused request spends none).
std::optional<RelayRefusal> refuse_stale(const nlohmann::json& request, long long now_ms,
                                         NonceWindow& nonces) {
  const long long sent_at = request["sentAt"];
  // Said by side, not by difference: a sentAt near the integers' ends would overflow one.
  if (sent_at < now_ms - kRelayFreshness.count())
    return RelayRefusal{
        409, fmt::format("stale: sent over {} ms before the relay's clock", kRelayFreshness.count())};
  if (sent_at > now_ms + kRelayFreshness.count())
    return RelayRefusal{
        409, fmt::format("stale: sent over {} ms after the relay's clock", kRelayFreshness.count())};
  if (!nonces.take(request["nonce"], now_ms)) return RelayRefusal{409, "a nonce already taken: a replay"};
  return std::nullopt;
}

}  // namespace

std::variant<RelayedEvent, RelayRefusal> read_relay_event(std::string_view rendezvous_key,
                                                          const std::string& body, long long now_ms,
                                                          NonceWindow& nonces) {
  if (body.size() > kRelayBodyBytes) return bad_shape(fmt::format("a body of {} bytes", body.size()));
  nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
  if (!request.is_object()) return bad_shape("not a JSON object");
  for (const auto& [field, value] : request.items()) {
    static const std::set<std::string> kFields{"type", "reason", "message", "nonce", "sentAt", "proof"};
    if (!kFields.contains(field))
      return bad_shape(fmt::format("an unknown field \"{}\"", truncate_utf8(field, 40, "...")));
    const bool number = field == "sentAt";
    if (number ? !value.is_number_integer() : !value.is_string())
      return bad_shape(fmt::format("\"{}\" is not {}", field, number ? "an integer" : "a string"));
  }
  if (request.size() != 6) return bad_shape("a field is missing");
  RelayedEvent event{request["type"], request["reason"], request["message"]};
  if (auto refused = refuse_proof(rendezvous_key, kProofLabel, request))
    return refused->status == 400 ? bad_shape(refused->why) : *refused;
  if (event.type != "Warning" && event.type != "Normal")
    return bad_shape("\"type\" is neither Warning nor Normal");
  if (!is_reason(event.reason)) return bad_shape("\"reason\" is not a word of letters and digits (1 to 128)");
  if (event.message.size() > kRelayMessageBytes || valid_utf8(event.message) != event.message)
    return bad_shape(fmt::format("\"message\" is not UTF-8 of at most {} bytes", kRelayMessageBytes));
  if (auto refused = refuse_stale(request, now_ms, nonces)) return *refused;
  return event;
}

std::string relay_pods_body(std::string_view rendezvous_key, const std::vector<std::string>& hosts,
                            const std::string& nonce, long long sent_at_ms) {
  nlohmann::json body = {{"hosts", hosts}, {"nonce", nonce}, {"sentAt", sent_at_ms}};
  body["proof"] = hmac_hex(rendezvous_key, std::string(kPodsProofLabel) + dump_json(body));
  return dump_json(body);
}

std::variant<std::vector<std::string>, RelayRefusal> read_relay_pods(std::string_view rendezvous_key,
                                                                     const std::string& body,
                                                                     long long now_ms, NonceWindow& nonces) {
  auto refuse = [](const std::string& why) {
    return RelayRefusal{400, why + "; a pods request is {hosts, nonce, sentAt, proof}"};
  };
  if (body.size() > kRelayPodsBodyBytes) return refuse(fmt::format("a body of {} bytes", body.size()));
  nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
  if (!request.is_object() || request.size() != 4 || !request.contains("hosts") ||
      !request.contains("nonce") || !request.contains("sentAt") || !request.contains("proof"))
    return refuse("not a JSON object of exactly these fields");
  if (!request["nonce"].is_string() || !request["proof"].is_string() ||
      !request["sentAt"].is_number_integer())
    return refuse("\"nonce\" and \"proof\" are strings, \"sentAt\" an integer");
  const nlohmann::json& hosts = request["hosts"];
  if (!hosts.is_array() || hosts.empty() || hosts.size() > kPodStatusHosts)
    return refuse(fmt::format("\"hosts\" is not an array of 1 to {} names", kPodStatusHosts));
  std::vector<std::string> names;
  for (const auto& host : hosts) {
    // A host name as the hostfile holds it: DNS labels, at most 253 characters.
    auto dns = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    };
    if (!host.is_string() || host.get_ref<const std::string&>().empty() ||
        host.get_ref<const std::string&>().size() > 253 ||
        !std::all_of(host.get_ref<const std::string&>().begin(), host.get_ref<const std::string&>().end(),
                     dns))
      return refuse("a host is not a DNS name of at most 253 characters");
    names.push_back(host);
  }
  if (auto refused = refuse_proof(rendezvous_key, kPodsProofLabel, request))
    return refused->status == 400 ? refuse(refused->why) : *refused;
  if (auto refused = refuse_stale(request, now_ms, nonces)) return *refused;
  return names;
}

std::string PodListLimiter::admit(long long now_ms) {
  if (last_ms_ >= 0) tokens_ = std::min<double>(kBurst, tokens_ + double(now_ms - last_ms_) / kRefillMs);
  last_ms_ = now_ms;
  if (tokens_ < 1)
    return fmt::format("more than {} pod lists, and one per {} s since", kBurst, kRefillMs / 1000);
  tokens_ -= 1;
  return "";
}

std::string RelayLimiter::admit(const RelayedEvent& event, long long now_ms) {
  if (last_ms_ >= 0) tokens_ = std::min<double>(kBurst, tokens_ + double(now_ms - last_ms_) / kRefillMs);
  last_ms_ = now_ms;
  std::erase_if(sent_, [&](const auto& entry) { return entry.second < now_ms - kDedupeMs; });
  const std::string text = event.type + "\n" + event.reason + "\n" + event.message;
  if (auto same = sent_.find(text); same != sent_.end())
    return fmt::format("the same Event was sent {} s ago", (now_ms - same->second) / 1000);
  if (tokens_ < 1)
    return fmt::format("more than {} Events, and one per {} s since", kBurst, kRefillMs / 1000);
  tokens_ -= 1;
  sent_[text] = now_ms;
  return "";
}

}  // namespace tmpi::rdv

// See sidecar.h. The loop: probe sshd, register (retrying refusals and unreachable
// coordinators), then beat every beatMillis; a 409 means the coordinator forgot us (it
// restarted): register again. The deadline restarts on every accepted registration or beat.
#include "rendezvous/sidecar.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/http_client.h"
#include "common/json_fields.h"
#include "common/proof.h"
#include "common/ssh_probe.h"
#include "common/utf8.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

using nlohmann::json;

// A coordinator's answer. The body is always an object (json_fields.h): a proxy's HTML page
// or a 200 that is not a JSON object reads as {}, and `text` keeps the start of what came,
// to say so.
struct Sidecar::Answer {
  long status = 0;
  json body;
  std::string text;

  // What the coordinator itself sends: 200 with a boolean jobEnded. Anything else (a proxy,
  // another server on the port) is a problem to retry, and no contact that resets the deadline.
  bool from_coordinator() const {
    const json* ended = node_at(body, "/jobEnded");
    return status == 200 && ended != nullptr && ended->is_boolean();
  }

  std::string problem() const {
    std::string error = string_at(body, "/error");
    return fmt::format("HTTP {}: {}", status,
                       !error.empty() ? error
                       : text.empty() ? "(an empty body)"
                                      : text);
  }
};

Sidecar::Sidecar(SidecarOptions options, TimeSource& clock)
    : options_(std::move(options)), clock_(clock), key_(derive_rendezvous_key(options_.private_key)) {}

Expected<Sidecar::Answer> Sidecar::post(const std::string& target, const std::string& body, Millis timeout) {
  static thread_local HttpClient client{TlsConfig{}};
  HttpRequest request;
  request.method = "POST";
  request.url = fmt::format("http://{}{}", options_.coordinator, target);
  request.body = body;
  request.headers = {"Content-Type: application/json"};
  request.timeout = timeout;
  request.max_body = std::size_t{1} << 20;  // the coordinator answers in a few hundred bytes
  TMPI_ASSIGN(HttpResponse response, client.send(request));
  return Answer{response.status, parse_object(response.body), truncate_utf8(response.body, 200, "...")};
}

Millis Sidecar::probe_interval() const {
  constexpr Millis kUntilReady{500};  // a refused connection costs nothing; the launcher waits
  return ssh_ready_.load() ? options_.probe_every : std::min(kUntilReady, options_.probe_every);
}

void Sidecar::probe_ssh_now() {
  SshVerdict verdict =
      probe_ssh(SshTarget{options_.ssh_host, options_.ssh_port, "", Millis(5000)}, options_.private_key);
  if (verdict.ok != ssh_ready_.load() || verdict.problem != ssh_problem_) {
    if (verdict.ok) {
      spdlog::info("sshd on port {} accepts the job key", options_.ssh_port);
    } else {
      spdlog::warn("sshd on port {}: {}", options_.ssh_port, verdict.problem);
    }
  }
  ssh_ready_.store(verdict.ok);
  ssh_problem_ = verdict.problem;
}

void Sidecar::nap_until(Clock::time_point until) {
  std::unique_lock lock(nap_mutex_);
  clock_.wait_until(nap_cv_, lock, until, [this] { return stop_.load(); });
}

void Sidecar::stop() {
  stop_.store(true);
  { std::lock_guard lock(nap_mutex_); }  // a nap that saw stop_ false is waiting by now
  clock_.notify_all(nap_cv_);
}

Status Sidecar::run() {
  Backoff backoff(Millis(200), Millis(5000));
  Millis beat_every(5000);
  bool registered = false;
  long long seq = 0;
  auto last_contact = clock_.now();
  auto last_probe = clock_.now() - options_.probe_every;
  bool last_reported_ssh = false;
  std::string last_problem = "the coordinator never answered";
  while (!stop_.load()) {
    if (clock_.now() - last_contact >= options_.deadline) {
      return make_error(Exit::kTempFail,
                        "gave up after {} s without the coordinator at {}: {}; raise TMPI_DEADLINE",
                        options_.deadline.count() / 1000, options_.coordinator, last_problem);
    }
    if (clock_.now() - last_probe >= probe_interval()) {
      probe_ssh_now();
      last_probe = clock_.now();
      if (registered && ssh_ready_.load() != last_reported_ssh) registered = false;  // tell the coordinator
    }
    Millis request_timeout = std::min(Millis(10000), std::max(Millis(500), options_.deadline / 4));
    if (!registered) {
      std::string nonce = random_nonce();
      bool ready = ssh_ready_.load();
      Registration message{options_.host, options_.slots, options_.gpus, ready,
                           ssh_problem_,  kVersion,       nonce};
      auto answer = post(kRegisterPath, signed_body(key_, message), request_timeout);
      if (answer && answer->from_coordinator()) {
        last_contact = clock_.now();
        registered = true;
        last_reported_ssh = ready;
        beat_every = Millis(std::clamp<std::int64_t>(int_at(answer->body, "/beatMillis", 5000), 100, 60000));
        spdlog::info("registered with {} as {} (sshReady={})", options_.coordinator, options_.host, ready);
        if (bool_at(answer->body, "/jobEnded", false)) return ok_status();
        continue;
      }
      last_problem = answer ? answer->problem() : answer.error().message;
      spdlog::info("register: {}; retrying", last_problem);  // a refusal too: DNS may lag a new pod
      nap_until(clock_.now() + backoff.next());
      continue;
    }
    // Until the next beat; while sshd does not accept the key yet, ask it again often and
    // tell the coordinator at once when it does (the launcher is waiting for exactly that:
    // a native sidecar starts before sshd).
    bool ssh_came_up = false;
    auto next_beat = clock_.now() + beat_every;
    while (!ssh_came_up && !stop_.load() && clock_.now() < next_beat) {
      if (ssh_ready_.load()) {
        nap_until(next_beat);
        break;
      }
      nap_until(std::min(next_beat, last_probe + probe_interval()));
      if (clock_.now() - last_probe < probe_interval()) continue;  // woke for the beat
      probe_ssh_now();
      last_probe = clock_.now();
      ssh_came_up = ssh_ready_.load();
    }
    if (ssh_came_up) {
      registered = false;
      continue;
    }
    if (stop_.load()) break;
    ++seq;
    auto answer = post(kBeatPath, signed_body(key_, Beat{options_.host, seq}), request_timeout);
    if (!answer || (answer->status != 409 && !answer->from_coordinator())) {
      last_problem = answer ? answer->problem() : answer.error().message;
      spdlog::info("beat: {}; retrying", last_problem);
      nap_until(clock_.now() + backoff.next());
      continue;
    }
    last_contact = clock_.now();
    backoff = Backoff(Millis(200), Millis(5000));
    if (answer->status == 409) {
      spdlog::info("the coordinator does not know us (it restarted?); registering again");
      registered = false;
    } else if (bool_at(answer->body, "/jobEnded", false)) {
      spdlog::info("the job has ended; exiting");
      return ok_status();
    }
  }
  if (left_.load()) return ok_status();
  return make_error(Exit::kTempFail, "stopped before the job ended: {}", last_problem);
}

void Sidecar::leave() {
  left_.store(true);
  stop();
  auto answer = post(kLeavePath, signed_body(key_, Leave{options_.host, random_nonce()}), Millis(1000));
  if (answer && answer->from_coordinator()) {
    spdlog::info("told {} that this pod is leaving", options_.coordinator);
  } else {
    spdlog::info("leaving; the coordinator did not take it ({}): it will miss the beats instead",
                 answer ? answer->problem() : answer.error().message);
  }
}

}  // namespace tmpi::rdv

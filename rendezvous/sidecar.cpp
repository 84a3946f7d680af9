// See sidecar.h. The loop: probe sshd, register (retrying refusals and unreachable
// coordinators), then beat every beatMillis; a 409 means the coordinator forgot us (it
// restarted): register again. The deadline restarts on every accepted registration or beat.
#include "rendezvous/sidecar.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/http_client.h"
#include "common/param_names.h"
#include "common/params.h"
#include "common/proof.h"
#include "common/ssh_probe.h"
#include "common/utf8.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

Sidecar::Sidecar(SidecarOptions options, TimeSource& clock)
    : options_(std::move(options)), clock_(clock), key_(derive_rendezvous_key(options_.private_key)) {}

// One request and its answer, verified (rendezvous/protocol.h): the answer, or a refusal
// that the coordinator signed. Anything else (a proxy's page, another server on the port, a
// forged body) is no answer: an Error that names the status and the start of what came, to
// retry, and no contact that resets the deadline.
template <typename T>
Expected<std::variant<T, Refusal>> Sidecar::exchange(Kind kind, const std::string& target,
                                                     const std::string& body, const std::string& nonce,
                                                     Millis timeout) {
  static thread_local HttpClient client{TlsConfig{}};
  HttpRequest request;
  request.method = "POST";
  request.url = fmt::format("http://{}{}", options_.coordinator, target);
  request.body = body;
  request.headers = {"Content-Type: application/json"};
  request.timeout = timeout;
  request.max_body = std::size_t{1} << 20;  // the coordinator answers in a few hundred bytes
  TMPI_ASSIGN(HttpResponse response, client.send(request));
  Verified<T> answer = read_answer<T>(key_, kind, nonce, response.status, response.body);
  if (!answer) {
    return make_error(Exit::kTempFail, "HTTP {}: not the coordinator's answer (no valid proof): {}",
                      response.status,
                      response.body.empty() ? "(an empty body)" : truncate_utf8(response.body, 200, "..."));
  }
  return std::move(*answer);
}

namespace {

// What a refusal says, for the log and the deadline's reason.
std::string problem_of(const Refusal& refusal) {
  return fmt::format("HTTP {}: {}", refusal.status, refusal.why);
}

}  // namespace

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
      return make_error(Exit::kTempFail, "gave up after {} s without the coordinator at {}: {}; raise {}",
                        options_.deadline.count() / 1000, options_.coordinator, last_problem,
                        env_name(param::kDeadline.name));
    }
    if (clock_.now() - last_probe >= probe_interval()) {
      probe_ssh_now();
      last_probe = clock_.now();
      if (registered && ssh_ready_.load() != last_reported_ssh) registered = false;  // tell the coordinator
    }
    Millis request_timeout = std::min(Millis(10000), std::max(Millis(500), options_.deadline / 4));
    if (!registered) {
      bool ready = ssh_ready_.load();
      auto answer = register_now(ready, request_timeout);
      if (const Registered* taken = answer ? std::get_if<Registered>(&*answer) : nullptr) {
        last_contact = clock_.now();
        registered = true;
        last_reported_ssh = ready;
        beat_every = Millis(std::clamp<long long>(taken->beat_millis, 100, 60000));
        spdlog::info("registered with {} as {} (sshReady={})", options_.coordinator, options_.host, ready);
        if (taken->job_ended) return ok_status();
        continue;
      }
      last_problem = answer ? problem_of(std::get<Refusal>(*answer)) : answer.error().message;
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
    auto answer = beat_now(++seq, request_timeout);
    const Refusal* refused = answer ? std::get_if<Refusal>(&*answer) : nullptr;
    if (!answer || (refused != nullptr && refused->status != 409)) {
      last_problem = answer ? problem_of(*refused) : answer.error().message;
      spdlog::info("beat: {}; retrying", last_problem);
      nap_until(clock_.now() + backoff.next());
      continue;
    }
    last_contact = clock_.now();
    backoff = Backoff(Millis(200), Millis(5000));
    if (refused != nullptr) {
      spdlog::info("the coordinator does not know us (it restarted?); registering again");
      registered = false;
    } else if (std::get<BeatTaken>(*answer).job_ended) {
      spdlog::info("the job has ended; exiting");
      return ok_status();
    }
  }
  if (left_.load()) return ok_status();
  return make_error(Exit::kTempFail, "stopped before the job ended: {}", last_problem);
}

// The challenge first when this launch's epoch is not known yet (or a 409 said it changed),
// then the registration, in it.
Expected<std::variant<Registered, Refusal>> Sidecar::register_now(bool ssh_ready, Millis timeout) {
  std::optional<std::string> known = epoch();
  if (!known) {
    Hello hello{random_nonce()};
    TMPI_ASSIGN(auto learnt, exchange<EpochTold>(Kind::kHello, kHelloPath, signed_body(key_, hello),
                                                 hello.nonce, timeout));
    if (const auto* refused = std::get_if<Refusal>(&learnt))
      return std::variant<Registered, Refusal>{*refused};
    known = std::get<EpochTold>(learnt).epoch;
    set_epoch(known);
  }
  Registration message{options_.host, options_.slots, options_.gpus,  ssh_ready,
                       ssh_problem_,  kVersion,       random_nonce(), *known};
  TMPI_ASSIGN(auto answer, exchange<Registered>(Kind::kRegister, kRegisterPath, signed_body(key_, message),
                                                message.nonce, timeout));
  if (const auto* refused = std::get_if<Refusal>(&answer); refused != nullptr && refused->status == 409)
    set_epoch(std::nullopt);  // perhaps another launch's: ask again
  return answer;
}

// A beat, in the known epoch. A verified 409 (forgotten, or another launch) forgets the epoch:
// the next registration learns it first.
Expected<std::variant<BeatTaken, Refusal>> Sidecar::beat_now(long long seq, Millis timeout) {
  Beat message{options_.host, seq, epoch().value_or(""), random_nonce()};
  TMPI_ASSIGN(auto answer, exchange<BeatTaken>(Kind::kBeat, kBeatPath, signed_body(key_, message),
                                               message.nonce, timeout));
  if (const auto* refused = std::get_if<Refusal>(&answer); refused != nullptr && refused->status == 409)
    set_epoch(std::nullopt);
  return answer;
}

std::optional<std::string> Sidecar::epoch() const {
  std::lock_guard lock(epoch_mutex_);
  return epoch_;
}

void Sidecar::set_epoch(std::optional<std::string> epoch) {
  std::lock_guard lock(epoch_mutex_);
  epoch_ = std::move(epoch);
}

void Sidecar::leave() {
  left_.store(true);
  stop();
  Leave message{options_.host, random_nonce(), epoch().value_or("")};
  auto answer =
      exchange<JobState>(Kind::kLeave, kLeavePath, signed_body(key_, message), message.nonce, Millis(1000));
  if (answer && std::holds_alternative<JobState>(*answer)) {
    spdlog::info("told {} that this pod is leaving", options_.coordinator);
  } else {
    spdlog::info("leaving; the coordinator did not take it ({}): it will miss the beats instead",
                 answer ? problem_of(std::get<Refusal>(*answer)) : answer.error().message);
  }
}

}  // namespace tmpi::rdv

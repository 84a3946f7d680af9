// See coordinator.h. Every refusal says why, in the reply and through callbacks.refused,
// since a node that cannot register is the usual reason a job does not start.
#include "rendezvous/coordinator.h"

#include <algorithm>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

namespace {

using nlohmann::json;

// Targets and hosts come off the wire and may hold invalid UTF-8: replace it, never throw.
std::string dump(const json& body) {
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

Reply json_reply(int status, const json& body) {
  return Reply{status, dump(body), "application/json"};
}

std::string text_field(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

const char* state_name(HostState state) {
  switch (state) {
    case HostState::kWaiting:
      return "waiting";
    case HostState::kSshFailed:
      return "ssh-failed";
    case HostState::kReady:
      return "ready";
    case HostState::kLost:
      return "lost";
  }
  return "unknown";
}

Coordinator::Coordinator(CoordinatorConfig config, CoordinatorCallbacks callbacks, Clock::time_point now)
    : config_(std::move(config)),
      callbacks_(std::move(callbacks)),
      start_(now),
      last_progress_(now),
      gate_(config_.gated ? StartGate::kClosed : StartGate::kOpen) {
  for (const auto& name : config_.hosts) {
    hosts_[name].name = name;
    if (auto it = config_.slots.find(name); it != config_.slots.end()) hosts_[name].slots = it->second;
  }
  for (const char* counter :
       {"registrations", "reregistrations", "departures", "refusals", "beats", "rank_starts", "rank_exits",
        "rank_misplaced", "rank_beats", "start_questions", "rank_refused_out_of_range",
        "rank_refused_unknown_host", "rank_refused_wrong_address"})
    counters_[counter] = 0;
}

// Whether a registration body is well formed and signed with the job's key; `why` says
// what is wrong (400: the shape, 403: the proof).
bool Coordinator::registration_signed(const json& body, int& status, std::string& why) const {
  Parsed<Registration> parsed = parse_registration(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) {
    status = refusal->status;
    why = refusal->why;
    return false;
  }
  if (!signed_by(config_.key, Kind::kRegister, body)) {
    status = 403;
    why = "bad proof: the sender does not hold this job's key";
    return false;
  }
  if (std::get<Registration>(parsed).epoch != config_.epoch) {  // no DNS for another launch's request
    status = 409;
    why = kStaleEpoch;
    return false;
  }
  return true;
}

// Only a signed request of this epoch, with an unused nonce, is worth a DNS lookup: anyone
// can reach the port, no unauthenticated request may make the coordinator resolve names, and
// a replayed one must not either.
std::optional<std::string> Coordinator::host_to_resolve(Call& call) const {
  if (call.method != "POST" || (call.target != kRegisterPath && call.target != kRankPath))
    return std::nullopt;
  call.parsed = parse_body(call.body);
  if (call.target == kRankPath) return rank_host_to_resolve(call);
  const json& body = call.parsed;
  std::string host = body.is_object() ? text_field(body, "host") : "";
  if (host.empty() || !hosts_.contains(host)) return std::nullopt;
  int status = 0;
  std::string why;
  if (!registration_signed(body, status, why) || nonces_.contains(text_field(body, "nonce")))
    return std::nullopt;
  return host;
}

Reply Coordinator::handle(const Call& call, Clock::time_point now) {
  now_ = now;
  route_ = call.target;  // read by refuse(), which only the routes below call
  if (call.method == "GET") {
    if (call.target == "/healthz") return Reply{200, "ok\n", "text/plain"};
    if (call.target == "/readyz") {
      return barrier_open_ ? Reply{200, "ready\n", "text/plain"} : Reply{503, summary() + "\n", "text/plain"};
    }
    bool view = call.target == "/metrics" || call.target == "/v1/hosts";
    if (view && !from_inside_pod(call)) {
      return refuse(403, "",
                    fmt::format("{} is served on loopback only: run `mpi-launcher hosts` or curl in the "
                                "launcher's pod (kubectl exec), or kubectl port-forward to it",
                                call.target));
    }
    if (call.target == "/metrics") return Reply{200, metrics(), "text/plain; version=0.0.4"};
    if (call.target == "/v1/hosts") return Reply{200, hosts_json(now), "application/json"};
  } else if (call.method == "POST") {
    if (call.target == kRegisterPath) return register_host(call, now);
    if (call.target == kBeatPath) return beat(call, now);
    if (call.target == kEndPath) return end(call);
    if (call.target == kRankPath) return rank(call, now);
    if (call.target == kRankBeatPath) return rank_beat(call, now);
    if (call.target == kLeavePath) return leave(call);
    if (call.target == kMayStartPath) return may_start(call);
    if (call.target == kHelloPath) return hello(call);
  }
  return json_reply(
      404, {{"error", fmt::format("no {} {}; see /v1/hosts, /metrics, /readyz", call.method, call.target)}});
}

Reply Coordinator::refuse(int status, const std::string& host, const std::string& why,
                          const std::optional<Asker>& asker) {
  ++counters_["refusals"];
  // A 409 is the session's own turn, not a fault: a sidecar of the launch before this one
  // (a restarted launcher) is told to register again, and does. It is counted, not logged.
  // Anyone can make refusals at line rate: one line per reason (the status, the route and
  // the start of why) per interval, the rest counted (refusal_log.h); names are excerpts.
  if (callbacks_.refused && status != 409) {
    std::string reason = fmt::format("{} {}: {}", status, route_, truncate_utf8(why, 48));
    std::string line = fmt::format("refused {}: {}", host.empty() ? "(no host)" : excerpt(host), why);
    if (auto told = refusal_log_.note(reason, line, now_)) callbacks_.refused(*told);
  }
  if (asker)
    return signed_reply(status, answer_body(config_.key, asker->kind, asker->nonce, Refusal{status, why}));
  return json_reply(status, {{"error", why}});
}

Reply Coordinator::register_host(const Call& call, Clock::time_point now) {
  const json body = call.parsed.is_null() ? parse_body(call.body) : call.parsed;
  if (!body.is_object()) return refuse(400, "", "the body is not a JSON object");
  std::string host = text_field(body, "host");
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return refuse(404, host, "not a host of this job (not in hosts.json)");
  int status = 0;
  std::string why;
  if (!registration_signed(body, status, why)) {
    // Another launch's epoch is a signed request: its sender can trust the 409 and register again.
    std::optional<Asker> signed_refusal;
    if (status == 409) signed_refusal = Asker{Kind::kRegister, text_field(body, "nonce")};
    return refuse(status, host, why, signed_refusal);
  }
  const Registration message = std::get<Registration>(parse_registration(body));
  const Asker asker{Kind::kRegister, message.nonce};
  int slots = message.slots, gpus = message.gpus;
  bool ssh_ready = message.ssh_ready;
  const std::string& nonce = message.nonce;
  if (std::find(call.resolved.begin(), call.resolved.end(), call.peer) == call.resolved.end()) {
    return refuse(
        403, host,
        fmt::format("{} does not resolve to the sender's address {} (it resolves to {})", host, call.peer,
                    call.resolved.empty() ? "nothing" : fmt::format("{}", fmt::join(call.resolved, ", "))),
        asker);
  }
  if (!nonces_.insert(nonce).second) return refuse(403, host, "replayed nonce", asker);
  HostEntry& entry = it->second;
  if (!entry.address.empty() && entry.address != call.peer && entry.state != HostState::kLost) {
    // Another address holds the name. While the name still resolves to it, that pod is the
    // host and this claim waits (409). Once it does not, the pod was recreated (a new pod,
    // a new IP, the same name): before the barrier the new pod simply takes its place;
    // after it, the job's ranks went with the old pod, so the host is lost, named at once.
    bool moved = std::find(call.resolved.begin(), call.resolved.end(), entry.address) == call.resolved.end();
    if (!moved) {
      return refuse(
          409, host,
          fmt::format("already registered from {}, which the name still resolves to", entry.address), asker);
    }
    if (barrier_open_) {
      std::string old = entry.address;
      entry.address.clear();  // the old pod's beats are refused from now on
      set_state(entry, HostState::kLost);
      entry.reason = fmt::format(
          "recreated at {} (was {}) after the job started: its ranks went with the old pod", call.peer, old);
      if (callbacks_.host_lost) callbacks_.host_lost(host, entry.reason);
      return refuse(409, host, entry.reason, asker);
    }
    ++counters_["reregistrations"];
  }
  entry.address = call.peer;
  if (slots > 0) entry.slots = slots;
  entry.gpus = gpus;
  entry.version = message.version;
  entry.last_seq = -1;
  entry.last_beat = now;
  set_state(entry, ssh_ready ? HostState::kReady : HostState::kSshFailed);
  const std::string& problem = message.ssh_problem;
  entry.reason = ssh_ready ? "" : (problem.empty() ? "sshd is not ready" : problem);
  ++counters_["registrations"];
  check_barrier();
  return signed_reply(200, answer_body(config_.key, Kind::kRegister, nonce,
                                       Registered{barrier_open_, config_.beat_interval.count(), job_ended_}));
}

Reply Coordinator::beat(const Call& call, Clock::time_point now) {
  json body = parse_body(call.body);
  Parsed<Beat> parsed = parse_beat(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) return refuse(refusal->status, "", refusal->why);
  const Beat& message = std::get<Beat>(parsed);
  const std::string& host = message.host;
  long long seq = message.seq;
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return refuse(404, host, "not a host of this job");
  if (!signed_by(config_.key, Kind::kBeat, body)) return refuse(403, host, "bad proof on a beat");
  const Asker asker{Kind::kBeat, message.nonce};
  if (auto other = stale(asker, message.epoch, host)) return *other;
  HostEntry& entry = it->second;
  // 409 tells the sidecar to register again (the coordinator restarted, or lost it).
  if (entry.address != call.peer || entry.state == HostState::kWaiting || entry.state == HostState::kLost) {
    return signed_reply(409, answer_body(config_.key, Kind::kBeat, message.nonce,
                                         Refusal{409, "not registered; register again"}));
  }
  if (seq <= entry.last_seq) return refuse(403, host, "replayed beat", asker);
  entry.last_seq = seq;
  entry.last_beat = now;
  ++counters_["beats"];
  return signed_reply(
      200, answer_body(config_.key, Kind::kBeat, message.nonce, BeatTaken{barrier_open_, job_ended_}));
}

Reply Coordinator::leave(const Call& call) {
  json body = parse_body(call.body);
  Parsed<Leave> parsed = parse_leave(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) return refuse(refusal->status, "", refusal->why);
  const Leave& message = std::get<Leave>(parsed);
  auto it = hosts_.find(message.host);
  if (it == hosts_.end()) return refuse(404, message.host, "not a host of this job");
  if (!signed_by(config_.key, Kind::kLeave, body)) return refuse(403, message.host, "bad proof on leaving");
  const Asker asker{Kind::kLeave, message.nonce};
  if (auto other = stale(asker, message.epoch, message.host)) return *other;
  if (!nonces_.insert(message.nonce).second) {
    return refuse(403, message.host, "leaving needs a fresh nonce and a proof", asker);
  }
  HostEntry& entry = it->second;
  // Only the pod that holds the name may give it up (a recreated pod has taken it already).
  if (entry.address != call.peer) {
    return signed_reply(409, answer_body(config_.key, Kind::kLeave, message.nonce,
                                         Refusal{409, "not registered from this address"}));
  }
  Reply taken{200, answer_body(config_.key, Kind::kLeave, message.nonce, JobState{job_ended_})};
  ++counters_["departures"];
  if (job_ended_ || entry.state == HostState::kLost) return taken;
  const std::string why = "its pod is being deleted: its sidecar got SIGTERM";
  entry.address.clear();
  if (barrier_open_) {
    set_state(entry, HostState::kLost);
    entry.reason = why;
    if (callbacks_.host_lost) callbacks_.host_lost(message.host, why);
  } else {
    set_state(entry, HostState::kWaiting);
    entry.reason = "no registration (" + why + ")";
  }
  return taken;
}

void Coordinator::end_job() {
  if (job_ended_) return;
  job_ended_ = true;
  if (callbacks_.job_ended) callbacks_.job_ended();
}

void Coordinator::check_barrier() {
  if (barrier_open_ || deadline_passed_ || ready_count() != static_cast<int>(hosts_.size())) return;
  barrier_open_ = true;
  if (callbacks_.barrier_open) callbacks_.barrier_open();
}

void Coordinator::tick(Clock::time_point now) {
  if (!barrier_open_ && !deadline_passed_) {
    if (now - start_ >= config_.deadline) {
      deadline_passed_ = true;
      if (callbacks_.deadline) callbacks_.deadline(summary(64));
    } else if (now - last_progress_ >= config_.progress_every) {
      last_progress_ = now;
      if (callbacks_.progress) callbacks_.progress(summary());
    }
  }
  if (callbacks_.refused) {
    for (const std::string& line : refusal_log_.flush(now)) callbacks_.refused(line);
  }
  if (job_ended_) return;
  check_agents(now);
  check_unheard(now);
  if (!barrier_open_) return;
  for (auto& [name, entry] : hosts_) {
    if (entry.state == HostState::kReady && silent_too_long(entry.last_beat, now)) {
      set_state(entry, HostState::kLost);
      entry.reason = fmt::format("no beat for {} s", ms_between(entry.last_beat, now) / 1000);
      if (callbacks_.host_lost) callbacks_.host_lost(name, entry.reason);
    }
  }
}

void Coordinator::set_state(HostEntry& entry, HostState state) {
  ready_ += (state == HostState::kReady ? 1 : 0) - (entry.state == HostState::kReady ? 1 : 0);
  entry.state = state;
}

}  // namespace tmpi::rdv

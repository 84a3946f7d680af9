// The rendezvous coordinator's protocol engine, free of I/O in the manner of flux-core's
// PMI server: the HTTP server (http_server.h, run by coordinator_service.h) feeds it
// parsed requests and the clock, and it answers and calls back through a table of
// callbacks. Unit tests drive it with no sockets, DNS or time.
//
// The requests and their proofs are defined in protocol.h. The coordinator accepts:
//   POST /v1/register  if the host is expected, the body well formed and signed, its name
//        resolves to the peer's address, the nonce is new, and no other address holds the
//        name (unless that host is lost, or its pod was recreated: docs/design.md).
//   POST /v1/beat      seq rising per host; the answer says whether the job has ended.
//   POST /v1/end       once, from `mpi-rendezvous end` on loopback, never from the network.
//   POST /v1/rank      the rank agents' start and exit reports.
//   POST /v1/rank-beat a running rank's agent, every beat: with or without sidecars, a
//        host whose running ranks' agents all fall silent for lost_after is lost. So is a host
//        of the plan (config.ranked_hosts) that none has reported from, lost_after after the
//        job's first report: down since the start, it never said a word.
//   POST /v1/may-start a rank agent, before it starts its rank: "wait" while the start gate
//        is closed (config.gated: the launcher's preflight runs beside the launch), then
//        "start", or "stop" with the preflight's reason; "start" when the job has no gate.
//   POST /v1/hello     a sidecar's challenge: the epoch, which every other request carries
//        (a request of another epoch is a 409, "register again").
//   POST /v1/leave     a sidecar's SIGTERM: before the barrier its host waits again (a new
//        pod may come); after it, the host is lost at once, not after lost_after.
//   GET /v1/hosts (the health table) and /metrics (Prometheus text) from inside the pod only
//   (loopback: they name every host and its address, nothing a stranger needs); /healthz and
//   /readyz (200 once the barrier is open) from anywhere, as the kubelet probes them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/topology.h"
#include "rendezvous/protocol.h"
#include "rendezvous/refusal_log.h"

namespace tmpi::rdv {

struct Call {
  std::string method, target, body;
  std::string peer;                   // the peer's IP address; "" from this process itself
  std::vector<std::string> resolved;  // what the claimed host resolves to (register only)
  nlohmann::json parsed = nullptr;    // the body, once host_to_resolve has parsed it
};

// A call from this process (no peer) or over loopback: from inside the coordinator's own pod,
// where a person's `kubectl exec` and `kubectl port-forward` arrive, and no other pod does.
bool from_inside_pod(const Call& call);

struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // The request carried a valid proof (the answer is signed): the server keeps the connection
  // as a key holder's, never evicted for a stranger's (http_server.h).
  bool proven = false;
};
// An answer signed over its request's nonce (protocol.h): only a request whose proof held gets one.
inline Reply signed_reply(int status, std::string body) {
  return Reply{status, std::move(body), "application/json", true};
}

// What the server turned away, since it started (the HTTP server's, http_server.h).
struct ServerCounts {
  long long evicted = 0;           // idle unproven connections closed to admit a new one
  long long refused = 0;           // new connections closed at the global cap: nothing to evict
  long long refused_per_peer = 0;  // new connections of an address at its unproven cap
  long long accept_failures = 0;   // runs of failed accepts (no descriptor left)
};

enum class HostState { kWaiting, kSshFailed, kReady, kLost };
const char* state_name(HostState state);

struct HostEntry {
  std::string name;
  HostState state = HostState::kWaiting;
  std::string reason = "no registration";
  std::string address, version;
  int slots = 0, gpus = 0;
  long long last_seq = -1;
  Clock::time_point last_beat{};
};

// A rank agent's report (POST /v1/rank): its start, its exit with code or signal, or that it
// found itself misplaced (on `host`, not on `expected`) and never started its rank.
struct RankEvent {
  int rank = -1;
  std::string host;
  RankEventKind event = RankEventKind::kStart;
  int code = 0, signal = 0;
  double seconds = 0;
  std::string tail;             // the last lines of its stderr
  std::string expected;         // kMisplaced: the host the hostfile gives the rank
  bool oom_killed = false;      // kExit by SIGKILL: its cgroup counted an OOM kill meanwhile
  long long memory_limit = 0;   // and its cgroup's limit, bytes (0: unknown)
  bool oom_counted = false;     // its agent read the OOM count before and after: none rose
  bool left_processes = false;  // kExit: processes the rank started still ran (protocol.h)
};

struct CoordinatorConfig {
  std::vector<std::string> hosts;    // expected host names (FQDN)
  std::map<std::string, int> slots;  // from hosts.json; a sidecar that knows none sends 0
  std::string key;                   // derive_rendezvous_key(job private key)
  // This launch's random epoch (coordinator_config draws one): every signed request but the
  // challenge must carry it; "" only in tests that predate it.
  std::string epoch;
  // The job's ranks: a rank report is taken only for a rank in [0, np). 0: the sum of the
  // slots (hosts.json's, or a registration's), else at most 65536.
  int np = 0;
  Millis beat_interval{5000};   // told to sidecars
  Millis lost_after{15000};     // no beat for this long after the barrier: lost
  Millis deadline{300000};      // the barrier must open by then
  Millis progress_every{5000};  // at most one progress line this often
  bool gated = false;           // the start gate is closed until open_gate() or stop_gate()
  // The hosts that run ranks by the plan (by-slot placement). Once the job's first rank report
  // is taken, each is expected: one not heard from by a rank report within lost_after of it is
  // lost (a host dead from the start sends nothing at all). Empty: only hosts heard from are
  // followed (a user's mapping, which the launcher cannot foresee).
  std::vector<std::string> ranked_hosts;
};

enum class StartGate { kClosed, kOpen, kStopped };

struct CoordinatorCallbacks {
  std::function<void(const std::string& line)> progress;  // waiting: "61/64 hosts ready; ..."
  std::function<void()> barrier_open;
  std::function<void(const std::string& summary)> deadline;  // the barrier did not open in time
  std::function<void(const std::string& host, const std::string& why)> host_lost;
  // A refused request, for the log: one line per reason per 10 s, the rest counted (refusal_log.h).
  std::function<void(const std::string& what)> refused;
  std::function<void()> job_ended;                         // sidecars are told on their next beat
  std::function<void(const RankEvent& event)> rank_event;  // a rank started or exited
};

class Coordinator {
 public:
  Coordinator(CoordinatorConfig config, CoordinatorCallbacks callbacks, Clock::time_point now);

  // The host name a register call claims, or a rank report names, when it needs resolving
  // before handle(); keeps the parsed body in call.parsed, so that handle() does not parse it
  // again. Only a signed request of this epoch with an unused nonce, for a known host, is
  // resolved (none at all for a bad proof or a replay); a rank report from the address its
  // host registered from, or was last found at, needs none.
  std::optional<std::string> host_to_resolve(Call& call) const;
  Reply handle(const Call& call, Clock::time_point now);
  // The service's DNS lookup for a request that names `host` began, or ended (before its
  // handle()). A host whose first report waits on a lookup is not judged silent meanwhile:
  // lookups run one at a time, and one slow answer holds every report queued behind it.
  void lookup_started(const std::string& host);
  void lookup_ended(const std::string& host);
  // Timers: progress, the deadline, lost hosts. Call it about once a second.
  void tick(Clock::time_point now);
  void end_job();
  // The job is being stopped (a rank failed, a host was lost, the launcher was asked to stop):
  // from now on the answers to the rank agents' reports and beats say jobEnded, and an agent
  // told so ends its rank at once (agent/agent.h), not when MPI's teardown reaches it. The
  // sidecars are not told: after a restart in place they serve the next attempt.
  void end_ranks() { ranks_ending_ = true; }
  // The server's counts, each tick: in the metrics. A connection refused for want of room
  // (our overload, not the host's fault) since a host's last beat gives it one more
  // lost_after before it is named lost: a beat may be what was refused.
  void server_counts(const ServerCounts& counts, Clock::time_point now);
  // The start gate's decision (once: a stopped gate stays stopped; opening a stopped one does nothing).
  void open_gate();
  void stop_gate(const std::string& reason);
  StartGate gate() const { return gate_; }

  bool barrier_open() const { return barrier_open_; }
  bool job_ended() const { return job_ended_; }
  int ready_count() const { return ready_; }
  // "61/64 hosts ready; waiting for a (no registration), b (sshd refused the job key)"
  std::string summary(std::size_t max_named = 8) const;
  const std::map<std::string, HostEntry>& hosts() const { return hosts_; }
  const std::map<int, RankEvent>& ranks() const { return ranks_; }
  std::string hosts_json(Clock::time_point now) const;
  std::string metrics() const;

 private:
  struct Asker {  // the request an answer is for: its kind and its nonce
    Kind kind;
    std::string nonce;
  };
  Reply register_host(const Call& call, Clock::time_point now);
  bool registration_signed(const nlohmann::json& body, int& status, std::string& why) const;
  Reply beat(const Call& call, Clock::time_point now);
  Reply end(const Call& call);
  Reply rank(const Call& call, Clock::time_point now);
  std::optional<std::string> rank_host_to_resolve(const Call& call) const;
  // Why a signed rank report is not taken from this sender (coordinator_bounds.cpp), if it is not.
  std::optional<Refusal> unbound_report(const Call& call, const RankReport& report);
  bool sender_known(const std::string& host, const std::string& peer) const;
  long long max_ranks() const;
  Reply rank_beat(const Call& call, Clock::time_point now);
  std::string canonical_host(const std::string& host) const;
  void check_agents(Clock::time_point now);
  void check_unheard(Clock::time_point now);
  void name_lost(const std::string& host, const std::string& why);
  bool silent_too_long(Clock::time_point last_beat, Clock::time_point now) const;
  Reply leave(const Call& call);
  Reply may_start(const Call& call);
  Reply hello(const Call& call);
  // A signed request of another launch's epoch: the 409 that says to register again.
  std::optional<Reply> stale(const Asker& asker, const std::string& epoch, const std::string& host);
  // A refusal, logged; signed for `asker` (the kind and nonce of a request whose proof held).
  Reply refuse(int status, const std::string& host, const std::string& why,
               const std::optional<Asker>& asker = std::nullopt);
  void check_barrier();
  void set_state(HostEntry& entry, HostState state);

  CoordinatorConfig config_;
  CoordinatorCallbacks callbacks_;
  std::map<std::string, HostEntry> hosts_;
  std::set<std::string> nonces_;
  Clock::time_point start_, last_progress_;
  bool barrier_open_ = false, deadline_passed_ = false, job_ended_ = false;
  bool ranks_ending_ = false;  // end_ranks(): what the rank agents are answered
  int ready_ = 0;              // hosts in kReady, kept as states change: the barrier check is O(1)
  std::map<std::string, long long> counters_;  // registrations, refusals, beats
  std::map<int, RankEvent> ranks_;             // the last report of each rank
  // The running ranks (a start report, no exit yet), by rank: their host and last beat.
  struct AgentBeat {
    std::string host;     // as hosts.json names it
    std::string address;  // the start report's sender: its beats come from there
    long long seq = 0;
    Clock::time_point last{};
  };
  std::map<int, AgentBeat> agents_;
  // The address each host's rank reports were last found to come from (by DNS): the next
  // report from there needs no lookup. One per host of hosts.json.
  std::map<std::string, std::string> report_address_;
  std::set<std::string> agents_lost_;  // hosts named lost by their agents' silence (once each)
  // The hosts heard from by a taken rank report, and when the job's first one was taken: the
  // clock of the hosts of config.ranked_hosts that have said nothing yet.
  std::set<std::string> heard_;
  std::optional<Clock::time_point> first_word_;
  std::map<std::string, int> lookups_;  // DNS lookups under way, by the host they are for
  ServerCounts server_counts_;
  RefusalLog refusal_log_;
  Clock::time_point now_{};           // the time of the request being handled, for refuse()'s log
  std::string route_;                 // its target
  Clock::time_point last_refusal_{};  // the last tick that saw the server refuse a connection
  StartGate gate_;
  std::string gate_reason_;  // why it was stopped
};

}  // namespace tmpi::rdv

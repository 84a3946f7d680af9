// The rendezvous wire protocol, defined once: every request the sidecars, the rank agents
// and `mpi-rendezvous end` send to the coordinator is a struct here, with its JSON and its
// proof. Senders fill a struct and send signed_body(); the coordinator reads a body with the
// parse_* functions, which check its shape (a hostile body is a 400, never an exception),
// and with signed_by(), which checks its proof.
//
// The proof signs every field: HMAC-SHA256(key, "<kind>|" + the canonical JSON of the body
// without "proof"), canonical being nlohmann's dump (keys sorted, no spaces, invalid UTF-8
// replaced). The receiver parses the body and dumps it again, so a field added, dropped or
// changed on the way, known to this version or not, breaks the proof. The key is
// derive_rendezvous_key(the job's private key), common/proof.h.
//
//   POST /v1/register  {host, slots, gpus, version, sshReady, sshProblem, nonce, proof}
//   POST /v1/beat      {host, seq, proof}          seq rises per host: no nonce needed
//   POST /v1/end       {nonce, proof}
//   POST /v1/rank      {rank, host, event, code, signal, seconds, tail, nonce, proof}
//   POST /v1/leave     {host, nonce, proof}        a sidecar's SIGTERM: its pod is going
//   POST /v1/rank-beat {rank, host, seq, proof}    a running rank's agent: its pod lives;
//                                                  seq rises per rank
//   POST /v1/may-start {rank, host, proof}         an agent asks before it starts its rank,
//                                                  while the preflight runs beside the launch
// Answers are unsigned: docs/design.md, "The rendezvous protocol".
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

namespace tmpi::rdv {

// This build's version (CMake's project version), sent in every registration.
inline constexpr const char* kVersion = TMPI_VERSION;

inline constexpr const char* kRegisterPath = "/v1/register";
inline constexpr const char* kBeatPath = "/v1/beat";
inline constexpr const char* kEndPath = "/v1/end";
inline constexpr const char* kRankPath = "/v1/rank";
inline constexpr const char* kLeavePath = "/v1/leave";
inline constexpr const char* kRankBeatPath = "/v1/rank-beat";
inline constexpr const char* kMayStartPath = "/v1/may-start";

struct Registration {
  std::string host;
  int slots = 0, gpus = 0;  // slots 0: the sidecar does not know; hosts.json decides
  bool ssh_ready = false;
  std::string ssh_problem;  // why sshd does not accept the job key, when it does not
  std::string version = kVersion;
  std::string nonce;
};

struct Beat {
  std::string host;
  long long seq = 0;
};

struct EndJob {
  std::string nonce;
};

// A sidecar that got SIGTERM (its pod is being deleted: an eviction, a preemption, a
// drain) says so at once, rather than leaving the coordinator to miss its beats.
struct Leave {
  std::string host;
  std::string nonce;
};

// event: "start", "exit", or "misplaced": the agent found itself on another host than the
// hostfile gives its rank, and did not start it (agent/placement.h); `expected` is
// that host, and code is 69.
struct RankReport {
  int rank = -1;
  std::string host, event;
  int code = -1, signal = 0;
  double seconds = 0;
  std::string tail;  // the last lines of the rank's stderr
  std::string nonce;
  std::string expected;
};

// A rank agent's beat, every --beat-interval while its rank runs (after its start report):
// the liveness of a node pod that needs no sidecar (`--wait ssh` or `none`). A seq, not a
// nonce, guards against replay, so that hours of beats keep no growing set of nonces.
struct RankBeat {
  int rank = -1;
  std::string host;
  long long seq = 0;
};

// A rank agent's question before it starts its rank, when the launcher runs its preflight's
// ssh step beside the launch (--start-gate, agent/gate.h): the answer is "wait", "start" or "stop" (the
// preflight failed; its reason comes along). No nonce: a replayed question learns only what
// the launcher would tell any agent of the job, and a nonce per question (agents ask again
// every few ms while the answer is "wait") would grow the coordinator's set of nonces.
struct MayStart {
  int rank = -1;
  std::string host;
};

// What a body of the wrong shape gets: the HTTP status (400) and why.
struct Refusal {
  int status = 400;
  std::string why;
};
template <typename T>
using Parsed = std::variant<T, Refusal>;

// The body to send: every field, and the proof over them.
std::string signed_body(std::string_view key, const Registration& message);
std::string signed_body(std::string_view key, const Beat& message);
std::string signed_body(std::string_view key, const EndJob& message);
std::string signed_body(std::string_view key, const RankReport& message);
std::string signed_body(std::string_view key, const Leave& message);
std::string signed_body(std::string_view key, const RankBeat& message);
std::string signed_body(std::string_view key, const MayStart& message);

// A received body, parsed; a discarded value when it is not JSON, or when it nests deeper
// than kMaxBodyDepth. No message nests at all (each is one flat object), but anyone can
// reach the port, and the proof copies and dumps the whole body, recursively: 32,000 levels
// fit in 64 KiB, and would take the coordinator thread's stack before any proof is checked.
inline constexpr int kMaxBodyDepth = 8;
nlohmann::json parse_body(std::string_view body);

// A received body (parse_body): its fields, type-checked.
Parsed<Registration> parse_registration(const nlohmann::json& body);
Parsed<Beat> parse_beat(const nlohmann::json& body);
Parsed<EndJob> parse_end(const nlohmann::json& body);
Parsed<RankReport> parse_rank(const nlohmann::json& body);
Parsed<Leave> parse_leave(const nlohmann::json& body);
Parsed<RankBeat> parse_rank_beat(const nlohmann::json& body);
Parsed<MayStart> parse_may_start(const nlohmann::json& body);

// Whether `body` carries the proof of a message of `kind` under key, over all of its other
// fields; compared in constant time.
enum class Kind { kRegister, kBeat, kEnd, kRank, kLeave, kRankBeat, kMayStart };
bool signed_by(std::string_view key, Kind kind, const nlohmann::json& body);

}  // namespace tmpi::rdv

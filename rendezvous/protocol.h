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
// Every signed request but the challenge carries the launch's `epoch` (docs/design.md, "The
// session"): a body of one launch is no body for the next. Fields that are empty (an epoch
// or nonce in a test's coordinator of no epoch) are left out of the body, as `expected` is;
// the trailing epoch and nonce of each struct default to empty.
//
//   POST /v1/hello     {nonce, proof}              a sidecar learns the epoch: {epoch}
//   POST /v1/register  {host, slots, gpus, version, sshReady, sshProblem, nonce, proof}
//   POST /v1/beat      {host, seq, proof}          seq rises per host: no nonce needed
//   POST /v1/end       {nonce, proof}
//   POST /v1/rank      {rank, host, event, code, signal, seconds, tail, nonce, proof}
//   POST /v1/leave     {host, nonce, proof}        a sidecar's SIGTERM: its pod is going
//   POST /v1/rank-beat {rank, host, seq, proof}    a running rank's agent: its pod lives;
//                                                  seq rises per rank
//   POST /v1/may-start {rank, host, proof}         an agent asks before it starts its rank,
//                                                  while the preflight runs beside the launch
// Every answer to a request whose proof holds is signed over that request's nonce (below).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/choice.h"

namespace tmpi::rdv {

// The field of a signed body, request or answer, that holds its HMAC proof.
inline constexpr const char* kProofField = "proof";

// This build's version (CMake's project version), sent in every registration.
inline constexpr const char* kVersion = TMPI_VERSION;

inline constexpr const char* kRegisterPath = "/v1/register";
inline constexpr const char* kBeatPath = "/v1/beat";
inline constexpr const char* kEndPath = "/v1/end";
inline constexpr const char* kRankPath = "/v1/rank";
inline constexpr const char* kLeavePath = "/v1/leave";
inline constexpr const char* kRankBeatPath = "/v1/rank-beat";
inline constexpr const char* kMayStartPath = "/v1/may-start";
inline constexpr const char* kHelloPath = "/v1/hello";

// The 409 for a signed request of another launch's epoch: the sender learns this one's
// (a sidecar by /v1/hello) and registers again.
inline constexpr const char* kStaleEpoch = "another launch's epoch: register again";

struct Registration {
  std::string host;
  int slots = 0, gpus = 0;  // slots 0: the sidecar does not know; hosts.json decides
  bool ssh_ready = false;
  std::string ssh_problem;  // why sshd does not accept the job key, when it does not
  std::string version = kVersion;
  std::string nonce;
  std::string epoch = {};
};

struct Beat {
  std::string host;
  long long seq = 0;
  std::string epoch = {};
  std::string nonce = {};  // binds the answer to this question; not kept (the seq, or nothing, guards)
};

struct EndJob {
  std::string nonce;
  std::string epoch = {};
};

// A sidecar's challenge: the answer is the coordinator's epoch, signed over this nonce.
// Not kept in the replay cache: a replayed challenge changes nothing and learns no more.
struct Hello {
  std::string nonce;
};

// A sidecar that got SIGTERM (its pod is being deleted: an eviction, a preemption, a
// drain) says so at once, rather than leaving the coordinator to miss its beats.
struct Leave {
  std::string host;
  std::string nonce;
  std::string epoch = {};
};

// A rank report's event, spelt on the wire as below: parse_rank reads it once, and no code
// past it compares the spelling. kMisplaced: the agent found itself on another host than
// the hostfile gives its rank, and did not start it (agent/placement.h).
enum class RankEventKind { kStart, kExit, kMisplaced };
inline constexpr Spellings<RankEventKind, 3> kRankEventKindSpellings{
    {{"start", RankEventKind::kStart},
     {"exit", RankEventKind::kExit},
     {"misplaced", RankEventKind::kMisplaced}}};

// kMisplaced: `expected` is the host the hostfile gives the rank, and code is 69.
struct RankReport {
  int rank = -1;
  std::string host;
  RankEventKind event = RankEventKind::kStart;
  int code = -1, signal = 0;
  double seconds = 0;
  std::string tail;  // the last lines of the rank's stderr
  std::string nonce;
  std::string expected;
  std::string epoch = {};
  // An exit by SIGKILL while its cgroup's OOM kill count rose (agent/oom.h), and whether
  // the count could be read at all (so that a SIGKILL with none counted is named as another's
  // kill): each sent only when true, so that a body without them is as it was.
  bool oom_killed = false;
  bool oom_counted = false;
  long long memory_limit = 0;  // with oom_killed: the cgroup's limit in bytes, 0 when unknown
  // An exit report sent while processes the rank started still ran (a shell's child, which its
  // agent ends after the report): the rank's end is not yet the end of all it ran, so a restart
  // in place waits for MPI's daemons, which wait for the agent. Sent only when true.
  bool left_processes = false;
};

// A rank agent's beat, every --beat-interval while its rank runs (after its start report):
// the liveness of a node pod that needs no sidecar (`--wait ssh` or `none`). A seq, not a
// nonce, guards against replay, so that hours of beats keep no growing set of nonces.
struct RankBeat {
  int rank = -1;
  std::string host;
  long long seq = 0;
  std::string epoch = {};
  std::string nonce = {};  // binds the answer to this question; not kept (the seq, or nothing, guards)
};

// A rank agent's question before it starts its rank, when the launcher runs its preflight's
// ssh step beside the launch (--start-gate, agent/gate.h): the answer is "wait", "start" or "stop" (the
// preflight failed; its reason comes along). No nonce: a replayed question learns only what
// the launcher would tell any agent of the job, and a nonce per question (agents ask again
// every few ms while the answer is "wait") would grow the coordinator's set of nonces.
struct MayStart {
  int rank = -1;
  std::string host;
  std::string epoch = {};
  std::string nonce = {};  // binds the answer to this question; not kept (the seq, or nothing, guards)
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
std::string signed_body(std::string_view key, const Hello& message);

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
Parsed<Hello> parse_hello(const nlohmann::json& body);

// Whether `body` carries the proof of a message of `kind` under key, over all of its other
// fields; compared in constant time.
enum class Kind { kRegister, kBeat, kEnd, kRank, kLeave, kRankBeat, kMayStart, kHello };
bool signed_by(std::string_view key, Kind kind, const nlohmann::json& body);
const char* kind_word(Kind kind);  // "register", "beat", ...: what a proof of the kind is made under

// The answers. Each is signed: "proof" = HMAC-SHA256(key, "answer:<kind>|<status>|<the
// request's nonce>|" + the canonical JSON of the answer without "proof"), so that an answer
// is good only for the question it answers, with the status it came with. A client takes an
// answer only when its proof holds (read_answer); anything else, from a proxy's page to a
// forged "stop", is no answer.
//   register   200 {accepted, barrier: open|waiting, beatMillis, jobEnded}
//   beat       200 {barrier, jobEnded}
//   hello      200 {epoch}
//   may-start  200 {decision: wait|start|stop, reason}
//   the rest   200 {jobEnded}
//   a refusal of a proven request: 4xx {error}, signed too (a 409 says to register again)
struct Registered {
  bool barrier_open = false;
  long long beat_millis = 5000;
  bool job_ended = false;
};
struct BeatTaken {
  bool barrier_open = false;
  bool job_ended = false;
};
struct JobState {
  bool job_ended = false;
};
struct EpochTold {
  std::string epoch;
};
enum class Decision { kWait, kStart, kStop };
struct StartAnswer {
  Decision decision = Decision::kWait;
  std::string reason;  // kStop: the launcher's reason
};

// The body of an answer to the request of `kind` that carried `nonce`: 200 for an answer,
// the refusal's status for a refusal.
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const Registered& answer);
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const BeatTaken& answer);
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const JobState& answer);
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const EpochTold& answer);
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const StartAnswer& answer);
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const Refusal& refusal);

// What a client got for its request of `kind` with `nonce`: the answer (status 200), or a
// refusal (any other status), when the proof holds over all of it and the body has the
// answer's shape; nullopt (no answer) else.
template <typename T>
using Verified = std::optional<std::variant<T, Refusal>>;
template <typename T>
Verified<T> read_answer(std::string_view key, Kind kind, std::string_view nonce, long status,
                        std::string_view body);
// Whether a report, a beat or a leave was taken: a verified 200 {jobEnded}. Anything else, an
// answer that does not verify included, means the coordinator was not heard.
bool job_state_taken(std::string_view key, Kind kind, std::string_view nonce, long status,
                     std::string_view body);

}  // namespace tmpi::rdv

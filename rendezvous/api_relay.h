// The API relay: the launcher's Events reach the Kubernetes API through the launcher pod's
// `mpi-rendezvous` sidecar, the one container of the job that holds an API token (a
// projected service-account token mounted there alone) and runs no user code. mpi-launcher's
// container runs ranks, so it holds no token: it hands each Event to the sidecar over the
// pod's loopback, and the sidecar sends it.
//
// The request is signed as the launcher's other loopback messages are (common/proof.h): an
// HMAC under the rendezvous key of the job key, over "api-event|" and the canonical body, so
// that only a holder of the job key can relay. It is fresh (a nonce, refused a second time,
// and the sender's clock within a minute of the sidecar's: both read the node's), bounded
// (8 KiB, every field checked for type, length and characters) and says only what an Event
// says: type, reason, message. The sidecar fixes the rest: the involvedObject is the TrainJob
// of its own JobSet, from its own flags, never from the request. Rank code can read the job
// key, so it can relay too, but at most Events about its own TrainJob, at the limiter's rate,
// and never the token itself (docs/design.md, "Trust").
//
// One more request, under its own label ("api-pods|"): the pods of the job's hosts that never
// came (rendezvous/pod_status.h), which the launcher asks for at the rendezvous deadline. The
// sidecar lists its own JobSet's pods in its own namespace; the request names only hosts (at
// most 64), so a key holder learns at most the status of its own job's pods, a few times a
// minute (PodListLimiter): the same as `kubectl describe pod` shows the job's owner.
//
// The parts here are pure (unit-tested, fuzzed): the bodies a sender signs, the reading of a
// request into an Event, a list of hosts or a refusal, the nonce window and the limiters.
// api_relay_server.cpp holds the I/O: the loopback server and the client.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tmpi::rdv {

inline constexpr const char* kRelayEventPath = "/v1/event";
inline constexpr const char* kRelayPodsPath = "/v1/pods";
inline constexpr std::size_t kRelayBodyBytes = 8 * 1024;
// A pods request: 64 DNS names of up to 253 bytes each, and the rest.
inline constexpr std::size_t kRelayPodsBodyBytes = 4 * kRelayBodyBytes;
inline constexpr std::size_t kRelayMessageBytes = 4 * 1024;  // the Event itself keeps 1 KiB
inline constexpr std::chrono::milliseconds kRelayFreshness{60000};

struct RelayedEvent {
  std::string type;     // Warning or Normal
  std::string reason;   // UpperCamelCase, as the API's Event reasons
  std::string message;  // UTF-8, at most kRelayMessageBytes
};

// The signed body: {type, reason, message, nonce, sentAt (Unix ms), proof}.
std::string relay_event_body(std::string_view rendezvous_key, const RelayedEvent& event,
                             const std::string& nonce, long long sent_at_ms);

struct RelayRefusal {
  int status;       // 400 shape, 403 proof, 409 stale or replayed
  std::string why;  // one line for the sender's log
};

// Remembers the nonces of the freshness window, so that a request is taken once. Bounded:
// a nonce older than the window is forgotten (a replay of it is stale anyway), and at most
// kMaxNonces are held (the limiter refuses long before).
class NonceWindow {
 public:
  static constexpr std::size_t kMaxNonces = 4096;
  // False when `nonce` was seen within the window (or the window is full).
  bool take(const std::string& nonce, long long now_ms);

 private:
  std::deque<std::pair<long long, std::string>> order_;
  std::set<std::string> seen_;
};

// A request, read and checked: the Event, or why not. `now_ms`: the sidecar's Unix ms.
std::variant<RelayedEvent, RelayRefusal> read_relay_event(std::string_view rendezvous_key,
                                                          const std::string& body, long long now_ms,
                                                          NonceWindow& nonces);

// The pods request: {hosts (1 to kPodStatusHosts names), nonce, sentAt, proof}.
std::string relay_pods_body(std::string_view rendezvous_key, const std::vector<std::string>& hosts,
                            const std::string& nonce, long long sent_at_ms);
std::variant<std::vector<std::string>, RelayRefusal> read_relay_pods(std::string_view rendezvous_key,
                                                                     const std::string& body,
                                                                     long long now_ms, NonceWindow& nonces);

// How often the pods are listed: a bucket of kBurst, one more every kRefillMs. The launcher
// asks once per attempt, at the deadline; a pod list of a large job is the API server's work.
class PodListLimiter {
 public:
  static constexpr int kBurst = 4;
  static constexpr long long kRefillMs = 15000;
  // "" when a list may go now; else why not.
  std::string admit(long long now_ms);

 private:
  double tokens_ = kBurst;
  long long last_ms_ = -1;
};

// How many Events reach the API: a bucket of kBurst, one more every kRefillMs, and the same
// Event (type, reason, message) at most once per kDedupeMs, as client-go's event correlator
// keeps a flood of one Event off the API server.
class RelayLimiter {
 public:
  static constexpr int kBurst = 20;
  static constexpr long long kRefillMs = 3000;
  static constexpr long long kDedupeMs = 600000;
  // "" when the Event may go now; else why not (for the sender).
  std::string admit(const RelayedEvent& event, long long now_ms);

 private:
  double tokens_ = kBurst;
  long long last_ms_ = -1;
  std::map<std::string, long long> sent_;  // the Event's text -> when; pruned past kDedupeMs
};

}  // namespace tmpi::rdv

// The API relay's I/O (the rules are api_relay.h): ApiRelay serves POST /v1/event (and
// POST /v1/pods, where serve_pods gave it a way to list them) on the pod's loopback, on a thread and
// io_context of its own (an Event may take 5 s at the API, which must not hold the sidecar's /readyz), and
// hands each Event that holds to `forward`; relay_event() and relay_pods() are the launcher's side of it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "common/backoff.h"
#include "common/error.h"
#include "rendezvous/api_relay.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/http_server.h"
#include "rendezvous/pod_status.h"

namespace tmpi::rdv {

// What became of an Event at the API: "" when it was recorded, else why not.
using ForwardEvent = std::function<std::string(const RelayedEvent&)>;

// What the API said of the hosts' pods: both the sidecar's listing and the launcher's reading.
struct RelayedPods {
  enum class Outcome {
    kListed,
    kRefused,  // the API refused the token `list pods` (the Role lacks it): said once, then the old split
    kFailed,   // the API unreachable, an answer of the wrong shape, the relay's own refusal
  };
  Outcome outcome = Outcome::kFailed;
  std::vector<PodStatusSummary> pods;  // kListed: one per host asked, in order
  std::string why;                     // otherwise
};
using ListPods = std::function<RelayedPods(const std::vector<std::string>& hosts)>;

class ApiRelay {
 public:
  // `private_key`: the job key's text; `clock_ms`: Unix ms (the real clock, or a test's).
  ApiRelay(const std::string& private_key, ForwardEvent forward, std::function<long long()> clock_ms = {});
  ~ApiRelay();
  // Serves POST /v1/pods with `list` (before start()); without it the path answers 404.
  void serve_pods(ListPods list) { list_pods_ = std::move(list); }
  // What the sidecar says as its pod stops (rendezvous/launcher_end.h), set by start_api_relay.
  void at_stop(std::function<void()> last_word) { last_word_ = std::move(last_word); }
  void say_last_word() const {
    if (last_word_) last_word_();
  }
  // Binds address:port (loopback: "127.0.0.1") and serves on its own thread.
  Expected<unsigned short> start(const std::string& address, unsigned short port);
  // One request, answered (pure but for `forward`; the unit tests call it).
  Reply handle(const Call& call);
  Reply handle_pods(const Call& call);

 private:
  std::string key_;
  ForwardEvent forward_;
  ListPods list_pods_;
  std::function<void()> last_word_;
  std::function<long long()> clock_ms_;
  NonceWindow nonces_;
  RelayLimiter limiter_;
  PodListLimiter pod_limiter_;
  boost::asio::io_context io_;
  std::unique_ptr<HttpServer> server_;
  std::jthread thread_;
};

struct RelayAnswer {
  bool recorded = false;
  std::string why;  // when not recorded: the relay's or the API's reason
};

// The launcher's side: one signed request to the relay on 127.0.0.1:port, within `timeout`.
// An error is a relay that cannot be reached (none in this pod).
Expected<RelayAnswer> relay_event(unsigned short port, std::string_view rendezvous_key,
                                  const RelayedEvent& event, Millis timeout);

}  // namespace tmpi::rdv

namespace tmpi::rdv {

// The launcher's side of POST /v1/pods: the pods of `hosts` (at most kPodStatusHosts), within
// `timeout`. An error is a relay that cannot be reached; the API's refusal is kRefused.
Expected<RelayedPods> relay_pods(unsigned short port, std::string_view rendezvous_key,
                                 const std::vector<std::string>& hosts, Millis timeout);

}  // namespace tmpi::rdv

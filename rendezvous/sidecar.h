// The node sidecar (`mpi-rendezvous`): proves that its pod's sshd accepts the job key,
// registers with the coordinator, beats, and exits 0 when the coordinator says the job has
// ended. It serves /readyz for the pod's readiness probe: ready only while sshd accepts
// the key. Every wait is under one deadline, with backoff and jitter between tries. On
// SIGTERM (its pod is being deleted) it tells the coordinator at once that it is leaving.
// It reads the time and naps through a TimeSource (common/clock.h): the real clock in the
// program, a manual one in tests, so that beats, backoffs and the deadline take no real time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "common/backoff.h"
#include "common/error.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

struct SidecarOptions {
  std::string host;         // this pod's name in hosts.json
  std::string coordinator;  // "host:port"
  std::string private_key;  // the job key's text
  int ssh_port = 2222;
  std::string ssh_host = "127.0.0.1";  // where this pod's own sshd answers
  Millis deadline{600000};             // the longest time without reaching the coordinator
  Millis probe_every{15000};           // how often sshd is asked again once it has answered
  int slots = 0, gpus = 0;             // 0: unknown here (no hosts.json); the coordinator has them
};

class Sidecar {
 public:
  explicit Sidecar(SidecarOptions options, TimeSource& clock = real_time());
  // Runs until the job ends (Ok) or the deadline passes (Exit::kTempFail).
  Status run();
  // For /readyz: true while the last probe found sshd accepting the job key.
  bool ssh_ready() const { return ssh_ready_.load(); }
  void stop();  // wakes run() from its nap
  // SIGTERM: tells the coordinator that this pod is going (signed, one try of at most 1 s),
  // then stops run(), which returns Ok. Called from another thread than run().
  void leave();

 private:
  template <typename T>
  Expected<std::variant<T, Refusal>> exchange(Kind kind, const std::string& target, const std::string& body,
                                              const std::string& nonce, Millis timeout);
  Expected<std::variant<Registered, Refusal>> register_now(bool ssh_ready, Millis timeout);
  Expected<std::variant<BeatTaken, Refusal>> beat_now(long long seq, Millis timeout);
  void probe_ssh_now();
  Millis probe_interval() const;            // often until sshd accepts the key, then probe_every
  void nap_until(Clock::time_point until);  // wakes early once stopped

  SidecarOptions options_;
  TimeSource& clock_;
  std::mutex nap_mutex_;  // with nap_cv_: stop() ends a nap at once
  std::condition_variable nap_cv_;
  std::string key_;
  std::atomic<bool> ssh_ready_{false}, stop_{false}, left_{false};
  std::string ssh_problem_ = "not probed yet";
  // The coordinator's epoch, from its signed challenge; leave() reads it from another thread.
  std::optional<std::string> epoch() const;
  void set_epoch(std::optional<std::string> epoch);
  mutable std::mutex epoch_mutex_;
  std::optional<std::string> epoch_;
};

}  // namespace tmpi::rdv

// JobSet's in-place restart agent in our own program (`mpi-rendezvous in-place-agent`), for
// the manifests/inplace-restart overlay: a native sidecar of every pod of the JobSet, first
// among the sidecars, that runs no user code and alone mounts the token it needs (a projected
// service-account token: patch its own pod, get its JobSet). It polls its JobSet, writes its
// pod's attempt annotation by server-side apply, holds the barrier (the startup probe on
// /barrier-is-down answers 503 until it lifts, so the pod's later containers wait), and
// returns the restart code when JobSet says its attempt is outdated: the kubelet restarts
// this container alone (a native sidecar, restartPolicy Always), and the pod's other
// containers (the SSH server, the ranks) keep running; mpi-launcher's --restarts restarts
// the MPI job itself. The decisions are inplace_barrier.h's (pure); here are only the I/O,
// bounded: each API call under its own deadline with backoff (common/kube_client.h), a poll
// with jitter between readings, failures retried for as long as the pod lives (an exit would
// be a new attempt for every pod, and a restart that JobSet counts against maxRestarts); only
// a refusal (401/403: the RBAC) or a wrong answer before the first reading ends it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/error.h"
#include "common/kube_client.h"
#include "rendezvous/inplace_barrier.h"

namespace tmpi::rdv::inplace {

// J:cmd/in-place-restart-agent/main.go DefaultInPlaceRestartExitCode.
inline constexpr Exit kRestartExit = Exit::kJobFailed;

struct AgentOptions {
  std::string jobset;         // its JobSet's name (the pod's label jobset.sigs.k8s.io/jobset-name)
  std::string pod;            // its pod's name (metadata.name)
  Millis poll{2000};          // between readings of the JobSet (jittered by up to a quarter)
  Millis call_budget{30000};  // one call's retries; past it the poll goes on, logged
};

class Agent {
 public:
  Agent(AgentOptions options, KubeClient& kube, TimeSource& clock = real_time());
  // Until told to restart (an Error of kRestartExit), a fatal answer (77: RBAC, 65: not a
  // JobSet), or stop() (Ok).
  Status run();
  bool barrier_down() const { return barrier_down_.load(); }
  void stop();

 private:
  Expected<std::optional<JobSetView>> read_jobset();
  Status write_attempt(std::int32_t attempt);
  void nap(Millis length);

  AgentOptions options_;
  KubeClient& kube_;
  TimeSource& clock_;
  AgentState state_;
  std::atomic<bool> barrier_down_{false}, stop_{false};
  std::mutex nap_mutex_;
  std::condition_variable nap_cv_;
};

}  // namespace tmpi::rdv::inplace

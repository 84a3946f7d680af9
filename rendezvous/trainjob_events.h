// Kubernetes Events about a TrainJob, sent with an API token: what `kubectl describe
// trainjob` shows of a failed job. Two senders use it: mpi-launcher where its own container
// holds a Kubernetes config (KUBECONFIG, outside the runtimes), and the launcher pod's
// `mpi-rendezvous` sidecar, which relays the launcher's Events (api_relay.h) with the only
// token of the job, mounted in that container alone.
//
// The first Event asks for the TrainJob's uid, which `kubectl describe` matches on
// (involvedObject.uid). A refusal (401/403: the Role is not applied) turns Events off for
// the process with one line that names the Role to apply; a missing TrainJob likewise. Each
// Event has 5 s, retries included: an Event is a courtesy, the exit code and report.json are
// the record. Never logs the token (KubeClient reads it per call and keeps it out of errors).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/kube_client.h"

namespace tmpi {

struct TrainJobRef {
  std::string namespace_, name, uid;
};

// A core/v1 Event about the TrainJob (pure; unit-tested). The message is cut to 1 KiB.
nlohmann::json event_body(const TrainJobRef& trainjob, const std::string& type, const std::string& reason,
                          const std::string& message, const std::string& instance,
                          std::chrono::system_clock::time_point now);

// The Role that Events need, as examples/rbac-events.yaml names it: the one line a refusal prints.
inline constexpr const char* kEventsRoleHint =
    "apply examples/rbac-events.yaml in this namespace (Role trainer-mpi-events: create events, get "
    "trainjobs, list pods; bound to the service account the job's pods run as, `default` unless a "
    "runtimePatch "
    "names another)";

// The Role's rule that the pods' statuses need (rendezvous/job_pods.h): the line a refusal prints.
inline constexpr const char* kPodsRoleHint =
    "apply examples/rbac-events.yaml again: its Role trainer-mpi-events now also grants list on pods, "
    "which says why a host never came (its pod not scheduled, or not running)";

enum class EventSent {
  kRecorded,
  kRefused,  // 401/403, a missing TrainJob, or an earlier refusal: Events are off
  kFailed,   // the API unreachable, or another error: this one Event is lost
};

class TrainJobEvents {
 public:
  // `component`: the Event's source and reportingComponent ("trainer-mpi/mpi-launcher").
  TrainJobEvents(KubeConfig config, Millis request_timeout, std::string trainjob, std::string component);
  EventSent send(const std::string& type, const std::string& reason, const std::string& message);
  // Why Events are off, once refused ("" before).
  const std::string& refusal() const { return refusal_; }
  const TrainJobRef& trainjob() const { return trainjob_; }

 private:
  EventSent resolve();  // the TrainJob's uid, once

  KubeClient client_;
  TrainJobRef trainjob_;
  std::string component_, refusal_;
  bool resolved_ = false;
};

}  // namespace tmpi

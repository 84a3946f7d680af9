// Kubernetes Events on the TrainJob for the job's discrete failures (a rendezvous that
// timed out, a failed preflight, a failed rank, a lost host, a stop, each restart in place),
// so that `kubectl describe trainjob` says what `kubectl logs` on the launcher would.
//
// Two ways, the first that applies:
//   - a Kubernetes config in this container (KUBECONFIG, or a mounted service account):
//     the launcher sends them itself (rendezvous/trainjob_events.h). Not in the runtimes:
//     this container runs ranks, and no token may lie where they run;
//   - the API relay (rendezvous/api_relay.h): the launcher pod's `mpi-rendezvous` sidecar,
//     which alone holds a token, on 127.0.0.1:--api-relay-port, each request signed under
//     the job key. The runtimes' way.
// Never fails, and never holds the job more than a few seconds: an Event is a courtesy, the
// exit code and report.json are the record. A refusal turns Events off with one line.
//
// The same two ways answer one question more, at the rendezvous deadline: what the API says
// of the pods of the hosts that never came (pods(); rendezvous/job_pods.h), which the
// classifier (launcher/missing_hosts.h) reads. Off with the Events (--events off).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "launcher/choices.h"
#include "rendezvous/api_relay_server.h"
#include "rendezvous/trainjob_events.h"

namespace tmpi::launch {

using tmpi::event_body;
using tmpi::TrainJobRef;

// --events, --trainjob, --service-account-dir, --namespace, --api-request-timeout,
// --api-relay-port, and the job key's folder (--ssh-dir) for the relay's proofs.
struct EventsOptions {
  EventsMode mode = EventsMode::kAuto;
  std::string trainjob, service_account_dir, kube_namespace;
  std::chrono::milliseconds api_request_timeout{0};
  int relay_port = 0;  // 0: no relay
  std::string ssh_dir;
};

// The message as an Event carries it: at most 1 KiB (the API relay's and TrainJobEvents' bound),
// cut at a whole character, with its troubleshooting note (trouble_keys.h) kept whole at its
// end, where a cut at the bound would take the key that the person reading the Event follows.
std::string event_message(const std::string& message);

class JobEvents {
 public:
  // Off with --events off, or when no TrainJob name is known (--trainjob, else the
  // JobSet's), or when neither a config nor the job key (for the relay) is found.
  JobEvents(const EventsOptions& options, const std::string& jobset);
  // A Warning event; returns whether it was recorded.
  bool warn(const std::string& reason, const std::string& message);
  // The pods of `hosts` (at most kPodStatusHosts), as the API shows them; within ~6 s.
  rdv::RelayedPods pods(const std::vector<std::string>& hosts);

 private:
  bool relay(const std::string& reason, const std::string& message);

  std::unique_ptr<TrainJobEvents> direct_;
  std::unique_ptr<KubeClient> direct_pods_;  // the same config's client, for the pods
  std::string jobset_;                       // whose pods (the TrainJob's name: Trainer's JobSet)
  std::string relay_key_;                    // the rendezvous key; "" when not relaying
  int relay_port_ = 0;
  bool off_ = false;
};

}  // namespace tmpi::launch

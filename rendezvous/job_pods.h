// The pods of a JobSet's hosts as the API shows them (rendezvous/pod_status.h), listed with a
// token: by the launcher pod's `mpi-rendezvous` sidecar for the API relay, or by mpi-launcher
// itself where its container holds a Kubernetes config (outside the runtimes). One list, by
// the JobSet's label, in pages of 500, stopped once every host asked for is found, under one
// deadline. Needs `list pods` in the namespace (examples/rbac-events.yaml); a refusal is
// Exit::kNoPerm, which the callers turn into one line and the two-way split of before.
#pragma once

#include <string>
#include <vector>

#include "common/kube_client.h"
#include "rendezvous/pod_status.h"

namespace tmpi {

inline constexpr int kPodPageSize = 500;
inline constexpr int kMaxPodPages = 200;  // 100,000 pods: past any JobSet, short of a loop

Expected<std::vector<PodStatusSummary>> list_job_pods(KubeClient& client, const std::string& jobset,
                                                      const std::vector<std::string>& hosts,
                                                      const Deadline& deadline);

}  // namespace tmpi

// A host that never came, told apart: at the rendezvous deadline the launcher has two
// witnesses of its own (the coordinator: the host's sidecar never registered, or registered
// and its SSH server was not ready) and one from the Kubernetes API (the pod's phase, its
// PodScheduled condition, its containers' waiting reasons: rendezvous/pod_status.h), asked
// through the launcher pod's sidecar. This pure classifier gives each host its own line, its
// own fix and its troubleshooting key, and the job its exit:
//
//   the API says                          line's key              lasting (exit 78)
//   PodScheduled=False, Unschedulable     host-not-scheduled      yes: no node fits
//   other PodScheduled=False (gated)      host-not-scheduled      no
//   waiting: image pull, config error     host-not-running        yes: a new pod waits alike
//   other not running, ended, no pod      host-not-running        no
//   Running (sidecar never registered)    host-never-registered   no: a blocked port, a NetworkPolicy
//   (registered, SSH not ready)           host-not-ready          no
//   (the API not asked or refused)        host-never-registered   no: the split of before
//
// A lasting cause ends the job with 78 (`config`), which the runtimes' failure policy does not
// restart (only 69 and 75 do): the rendezvous already waited its timeout, and a JobSet restart
// would make the same pods, which the scheduler or the kubelet would refuse alike
// (docs/design.md, "Exit codes"). The others stay 75, which it restarts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "launcher/trouble_keys.h"
#include "rendezvous/pod_status.h"

namespace tmpi::launch {

// A host the rendezvous waited for in vain, as the coordinator saw it.
struct MissingHost {
  std::string host;
  bool registered = false;  // its sidecar registered; its SSH server was not ready
  std::string reason;       // the coordinator's: "no registration", "sshd is not ready", ...
};

struct HostAbsence {
  std::string host;
  Trouble trouble = Trouble::kHostNeverRegistered;
  bool lasting = false;  // a restart would meet it again
  std::string line;      // "HOST: its pod P was never scheduled (...); FIX (see ...#KEY)"
};

struct AbsenceVerdict {
  std::vector<HostAbsence> hosts;  // the most telling first: lasting, then by key as the table above
  Exit exit = Exit::kTempFail;
  std::string message;  // the job's reason, ending with the first host's troubleshooting note
};

// `pods`: the API's answer for `missing`'s hosts (nullopt: not asked, refused or failed: the
// coordinator's split alone, in the words of before). `summary`: the coordinator's line ("1/2
// hosts ready; waiting for ..."); `waited_s`: the rendezvous timeout; `port`: the rendezvous
// port a sidecar registers on; `timeout_variable`: TMPI_RENDEZVOUS_TIMEOUT.
AbsenceVerdict classify_missing(const std::vector<MissingHost>& missing,
                                const std::optional<std::vector<PodStatusSummary>>& pods,
                                const std::string& summary, long long waited_s, int port,
                                const std::string& timeout_variable);

}  // namespace tmpi::launch

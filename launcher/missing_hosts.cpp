// See missing_hosts.h.
#include "launcher/missing_hosts.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace tmpi::launch {

namespace {

// The kubelet's waiting reasons that a new pod of the same spec meets again: the image cannot
// be pulled (pkg/kubelet/images/types.go), or the container's config names what is not there
// (pkg/kubelet/kuberuntime/kuberuntime_container.go: a missing Secret, ConfigMap or key).
bool lasting_wait(const std::string& reason) {
  static const std::set<std::string> kLasting{"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                                              "ErrImageNeverPull", "CreateContainerConfigError"};
  return kLasting.contains(reason);
}

std::string wait_fix(const std::string& reason, const std::string& pod) {
  if (reason == "CreateContainerConfigError")
    return "create the Secret or ConfigMap it names, or fix the key it reads";
  if (lasting_wait(reason))
    return "check the image's name and tag, that the registry has it, and the pod's imagePullSecrets";
  return fmt::format("`kubectl describe pod {}` says more", pod);
}

std::string reason_and_message(const std::string& reason, const std::string& message) {
  if (message.empty()) return reason.empty() ? "no reason given" : reason;
  return reason.empty() ? message : reason + ": " + message;
}

const WaitingContainer* first_waiting(const PodStatusSummary& pod) {
  return pod.waiting.empty() ? nullptr : &pod.waiting.front();
}

HostAbsence from_api(const MissingHost& missing, const PodStatusSummary& pod, int port) {
  HostAbsence out{missing.host, Trouble::kHostNotRunning, false, ""};
  const std::string& host = missing.host;
  if (!pod.found) {
    out.line = fmt::format(
        "{}: no pod of the job has this name: its Job did not make it (a ResourceQuota, a LimitRange or an "
        "admission webhook refused it: `kubectl describe job`, `kubectl get events`)",
        host);
  } else if (pod.scheduled == "False") {
    out.trouble = Trouble::kHostNotScheduled;
    out.lasting = pod.scheduled_reason == "Unschedulable";
    out.line = fmt::format(
        "{}: its pod {} was never scheduled ({}); {}", host, pod.pod,
        reason_and_message(pod.scheduled_reason, pod.scheduled_message),
        out.lasting
            ? "no node has what it asks: free GPUs or lower the request, or fix its node selector, "
              "tolerations or the queue's quota (under Kueue, admitted jobs fit the quota: the quota is "
              "larger than the nodes)"
            : "the scheduler has not taken it yet: `kubectl describe pod` on it says why");
  } else if (pod.terminating || pod.phase == "Failed" || pod.phase == "Succeeded") {
    out.line = fmt::format("{}: its pod {} {} before the rendezvous; the JobSet's restart makes it again",
                           host, pod.pod, pod.terminating ? "is being deleted" : "ended (" + pod.phase + ")");
  } else if (pod.phase != "Running") {
    const WaitingContainer* waits = first_waiting(pod);
    out.lasting = waits != nullptr && lasting_wait(waits->reason);
    out.line =
        waits == nullptr
            ? fmt::format(
                  "{}: its pod {} is {}, not running, and no container says why; `kubectl describe "
                  "pod {}` says more",
                  host, pod.pod, pod.phase, pod.pod)
            : fmt::format("{}: its pod {} is {}, not running: container {} waits ({}); {}", host, pod.pod,
                          pod.phase, waits->container, reason_and_message(waits->reason, waits->message),
                          wait_fix(waits->reason, pod.pod));
  } else {
    out.trouble = Trouble::kHostNeverRegistered;
    const WaitingContainer* waits = first_waiting(pod);
    out.line = fmt::format(
        "{}: its pod {} runs, but its mpi-rendezvous sidecar never registered with the launcher on port "
        "{}{}: a "
        "NetworkPolicy or firewall drops the port between the pods (install manifests/kubeflow/profile, or "
        "open "
        "{} and the SSH port), or the sidecar cannot reach the launcher (`kubectl logs {} -c "
        "mpi-rendezvous`)",
        host, pod.pod, port,
        waits == nullptr ? ""
                         : fmt::format(" (container {} waits: {})", waits->container,
                                       reason_and_message(waits->reason, "")),
        port, pod.pod);
  }
  out.line += trouble_note(out.trouble);
  return out;
}

// The order the job's message names them in: what a restart cannot mend, then by the table.
int rank_of(const HostAbsence& absence) {
  int key = 0;
  for (Trouble trouble : {Trouble::kHostNotScheduled, Trouble::kHostNotRunning, Trouble::kHostNeverRegistered,
                          Trouble::kHostNotReady}) {
    if (absence.trouble == trouble) break;
    ++key;
  }
  return (absence.lasting ? 0 : 10) + key;
}

}  // namespace

AbsenceVerdict classify_missing(const std::vector<MissingHost>& missing,
                                const std::optional<std::vector<PodStatusSummary>>& pods,
                                const std::string& summary, long long waited_s, int port,
                                const std::string& timeout_variable) {
  AbsenceVerdict out;
  const bool any_unregistered =
      std::any_of(missing.begin(), missing.end(), [](const MissingHost& m) { return !m.registered; });
  for (const MissingHost& host : missing) {
    const PodStatusSummary* pod = nullptr;
    if (pods) {
      auto found =
          std::find_if(pods->begin(), pods->end(), [&](const auto& p) { return p.host == host.host; });
      pod = found == pods->end() ? nullptr : &*found;
    }
    if (host.registered) {
      out.hosts.push_back(
          {host.host, Trouble::kHostNotReady, false,
           fmt::format("{}: registered, but its SSH server was not ready ({})", host.host, host.reason) +
               trouble_note(Trouble::kHostNotReady)});
    } else if (pod != nullptr) {
      out.hosts.push_back(from_api(host, *pod, port));
    } else {
      out.hosts.push_back(
          {host.host, Trouble::kHostNeverRegistered, false,
           fmt::format("{}: {}", host.host, host.reason) + trouble_note(Trouble::kHostNeverRegistered)});
    }
  }
  std::stable_sort(out.hosts.begin(), out.hosts.end(),
                   [](const HostAbsence& a, const HostAbsence& b) { return rank_of(a) < rank_of(b); });
  const bool lasting = !out.hosts.empty() && out.hosts.front().lasting;
  out.exit = lasting ? Exit::kConfig : Exit::kTempFail;
  if (!pods || out.hosts.empty()) {  // the coordinator's words alone, as before the API was asked
    out.message =
        fmt::format("rendezvous timed out after {} s: {}; raise {}{}", waited_s, summary, timeout_variable,
                    trouble_note(any_unregistered ? Trouble::kHostNeverRegistered : Trouble::kHostNotReady));
    return out;
  }
  const std::string ready = summary.substr(0, summary.find(';'));
  const std::string others =
      out.hosts.size() > 1
          ? fmt::format("; {} more host(s) on lines of their own above", out.hosts.size() - 1)
          : "";
  // The first host's line ends the message, and its note with it: its key is the job's.
  out.message = fmt::format("rendezvous timed out after {} s ({}{}){}: {}", waited_s, ready, others,
                            lasting ? "; a restart would not mend it" : "", out.hosts.front().line);
  return out;
}

}  // namespace tmpi::launch

// See launcher_end.h.
#include "rendezvous/launcher_end.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tmpi::rdv {

std::optional<std::string> launcher_oom_message(const PodStatusSummary& pod, bool ranks_here) {
  if (!pod.found) return std::nullopt;
  for (const EndedContainer& ended : pod.ended) {
    if (ended.reason != "OOMKilled") continue;  // containerd's CRI plugin, oomExitReason
    return fmt::format(
        "the kernel's OOM killer killed the launcher pod {}'s container {} whole{} "
        "(the kubelet says OOMKilled, exit {}), mpi-launcher {} with it, so no verdict was written; "
        "give the launcher pod more memory{} (see docs/troubleshooting.md#rank-out-of-memory)",
        pod.pod, ended.container,
        ended.memory_limit.empty() ? std::string() : fmt::format(" at its limit of {}", ended.memory_limit),
        ended.exit_code, ranks_here ? "and the ranks in it (runLauncherAsNode)" : "and mpirun",
        ranks_here ? ", or its ranks less to hold" : "");
  }
  return std::nullopt;
}

void say_launcher_end(const OwnPod& own_pod, const std::function<void(const std::string&)>& warn,
                      bool ranks_here) {
  for (int ask = 0; ask < kLauncherEndAsks; ++ask) {
    if (ask > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    auto pods = own_pod();
    if (!pods) {
      spdlog::debug("the launcher's end not asked of the API: {}", pods.error().message);
      return;
    }
    if (pods->empty() || !pods->front().found) return;  // its own pod not listed: nothing to read
    if (pods->front().ended.empty()) continue;          // not ended yet, as the kubelet saw it
    if (std::optional<std::string> message = launcher_oom_message(pods->front(), ranks_here)) {
      spdlog::error("{}", *message);
      warn(*message);
    }
    return;
  }
}

}  // namespace tmpi::rdv

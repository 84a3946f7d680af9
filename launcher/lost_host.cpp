// See lost_host.h.
#include "launcher/lost_host.h"

#include <csignal>

#include <fmt/format.h>

#include "launcher/trouble_keys.h"

namespace tmpi::launch {

namespace {

constexpr const char* kOomKilledReason = "OOMKilled";  // containerd's CRI plugin, oomExitReason
constexpr int kKilledBySigKill = 128 + SIGKILL;

}  // namespace

std::optional<Failure> lost_host_out_of_memory(const Failure& lost, const PodStatusSummary& pod) {
  if (lost.event != FailureKind::kHostLost || !pod.found) return std::nullopt;
  for (const EndedContainer& ended : pod.ended) {
    if (ended.reason != kOomKilledReason) continue;
    Failure failure{
        kKilledBySigKill,
        fmt::format("host {} lost: the kernel's OOM killer killed its pod {}'s container {} whole{} "
                    "(the kubelet says OOMKilled, exit {}), and the ranks there with it; give the pod more "
                    "memory, or the ranks less to hold{}",
                    lost.host, pod.pod, ended.container,
                    ended.memory_limit.empty() ? std::string()
                                               : fmt::format(" at its limit of {}", ended.memory_limit),
                    ended.exit_code, trouble_note(Trouble::kRankOutOfMemory)),
        FailureKind::kRankFailed, true};
    failure.signal = SIGKILL;
    failure.oom_killed = true;
    failure.host = lost.host;
    return failure;
  }
  return std::nullopt;
}

}  // namespace tmpi::launch

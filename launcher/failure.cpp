// See failure.h.
#include "launcher/failure.h"

#include <fmt/format.h>

namespace tmpi::launch {

std::optional<Failure> attribute_failure(const JobOutcome& outcome, const AskHosts& ask_hosts) {
  if (outcome.primary) return outcome.primary;
  if (outcome.mpirun_status != 0 || outcome.secondary) {
    // MPI stopped the job without a rank failing on its own: is a host gone?
    if (std::optional<std::string> gone = ask_hosts ? ask_hosts() : std::nullopt) {
      return Failure{1, *gone, "HostLost"};
    }
  }
  if (outcome.secondary) return outcome.secondary;
  if (outcome.mpirun_status != 0) {
    return Failure{1, fmt::format("{} exited with status {}", outcome.launcher, outcome.mpirun_status)};
  }
  return std::nullopt;
}

}  // namespace tmpi::launch

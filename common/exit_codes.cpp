// The exit-code table (common/error.h). One table, so that the README, report.json and a
// JobSet's failure policy (examples/, podFailurePolicy onExitCodes) read the same codes:
// the rows marked retry are the infrastructure faults that the example runtimes restart
// on; every other non-zero code, the user's program's included, ends the job.
// tests/unit/exit_codes_test.cpp checks that the README holds exit_codes_markdown().
#include <fmt/format.h>

#include "common/error.h"

namespace tmpi {

const std::vector<ExitInfo>& exit_table() {
  static const std::vector<ExitInfo> table = {
      {Exit::kOk, "ok", "the job (or the program's work) succeeded", false},
      {Exit::kJobFailed, "job-failed", "the job failed and no rank's own code is known", false},
      {Exit::kUsage, "usage", "a flag, variable or command line is wrong; the message names it and the fix",
       false},
      {Exit::kData, "bad-input",
       "an input's content is wrong (hostfile, pod list, hosts.json, Secret, API answer); the message "
       "names the input, the line or field, and the fix",
       false},
      {Exit::kUnavailable, "unavailable",
       "the preflight found a broken host or link, or a service that is needed (the API, the "
       "coordinator) is unreachable",
       true},
      {Exit::kSoftware, "internal", "an internal error of trainer-mpi; please report it with the log", false},
      {Exit::kOsErr, "system",
       "the system refused a resource (fork, a pipe, file descriptors): see the pod's limits", false},
      {Exit::kIo, "io",
       "a file could not be read or written (permissions, a full disk); nothing half-written is left", false},
      {Exit::kTempFail, "temporary",
       "a deadline passed (rendezvous, wait, check step) or a host was lost; a retry may pass", true},
      {Exit::kNoPerm, "refused",
       "the Kubernetes API or a service refused our credentials (RBAC, token), or the job's Secret is not "
       "the job's own",
       false},
      {Exit::kConfig, "config",
       "what the job asks for cannot be had, and a restart would meet the same: the image lacks it (a GPU "
       "job's fabric check found no NCCL), or a host's pod cannot be scheduled (no node has its resources) "
       "or "
       "started (its image cannot be pulled, a Secret it names is missing); the message names what, where, "
       "and the fix",
       false},
  };
  return table;
}

const ExitInfo* exit_info(int code) {
  for (const auto& row : exit_table()) {
    if (static_cast<int>(row.exit) == code) return &row;
  }
  return nullptr;
}

std::string exit_codes_markdown() {
  std::string out = "| code | name | meaning | retry |\n|---|---|---|---|\n";
  for (const auto& row : exit_table()) {
    out += fmt::format("| {} | `{}` | {} | {} |\n", static_cast<int>(row.exit), row.name, row.meaning,
                       row.retry ? "yes" : "no");
  }
  out +=
      "| other | `job` | a rank's own exit code (or mpirun's), passed through as mpirun and srun do; 128+N "
      "for a rank killed by signal N, and for mpi-launcher itself stopped by signal N | no |\n";
  return out;
}

}  // namespace tmpi

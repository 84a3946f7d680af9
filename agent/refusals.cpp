// See refusals.h.
#include "agent/refusals.h"

#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "agent/gate.h"
#include "common/error.h"
#include "common/log.h"
#include "rendezvous/protocol.h"

namespace tmpi::launch {

using rdv::RankReport;

// A rank on another host than the hostfile gives it is not started (agent/placement.h): it
// is said on stderr, where a person running mpirun by hand sees it, and reported, so that the
// launcher stops the job and names the rank, where it ran and where it belonged.
int refuse_misplaced(const RankAgentOptions& options, const RankIdentity& id, const Misplacement& wrong) {
  std::string why = fmt::format(
      "mpi-rank: rank {} runs on {}, but the hostfile puts it on {}: not starting it. Is the MPI reading "
      "the hostfile (--hostfile, and Open MPI 5's PRRTE parameters)? Was the hostfile changed after "
      "mpi-init wrote it?",
      id.rank, wrong.actual, wrong.expected);
  std::fprintf(stderr, "%s\n", why.c_str());
  RankReport report_of;
  report_of.event = rdv::RankEventKind::kMisplaced;
  report_of.code = static_cast<int>(Exit::kUnavailable);
  report_of.expected = wrong.expected;
  report_of.tail = why;
  report(options, id, report_of);
  return static_cast<int>(Exit::kUnavailable);
}

// Asks the launcher whether the rank may start (agent/gate.h): 0 when it may, else the agent's
// exit code, with the reason on stderr, where mpirun passes it on to the launcher's log.
int pass_start_gate(const RankAgentOptions& options, const RankIdentity& id) {
  GateVerdict verdict = wait_for_start(options, id.rank, hostname());
  if (verdict.answer == GateAnswer::kStart) {
    if (!verdict.reason.empty())
      std::fprintf(stderr, "mpi-rank: rank %d: %s\n", id.rank, log::printable(verdict.reason).c_str());
    return 0;
  }
  bool stopped = verdict.answer == GateAnswer::kStop;
  std::string why =
      fmt::format("mpi-rank: rank {}: not starting it: {}", id.rank,
                  log::printable(stopped ? "the launcher says: " + verdict.reason : verdict.reason));
  std::fprintf(stderr, "%s\n", why.c_str());
  auto code = static_cast<int>(stopped ? Exit::kUnavailable : Exit::kTempFail);
  // Where only the answers were forged on the way, the report passes: the job stops at once.
  if (!stopped) {
    RankReport gave_up;
    gave_up.event = rdv::RankEventKind::kExit;
    gave_up.code = code;
    gave_up.tail = why;
    report(options, id, gave_up);
  }
  return code;
}

// The rank never ran: that is a failure of this rank, reported and named as one, never a
// success (a status of 0 from waitpid(-1)), and no signal may go to pid -1 (every process of
// the user). Most likely the pod's process limit (RLIMIT_NPROC, pids.max).
int refuse_unforked(const RankAgentOptions& options, const RankIdentity& id, int error) {
  std::string why = fmt::format(
      "mpi-rank: cannot start the rank: fork: {} (the pod's process or memory limit?)", std::strerror(error));
  std::fprintf(stderr, "%s\n", why.c_str());
  RankReport exit;
  exit.event = rdv::RankEventKind::kExit;
  exit.code = static_cast<int>(Exit::kOsErr);
  exit.tail = why;
  report(options, id, exit);
  return static_cast<int>(Exit::kOsErr);
}

}  // namespace tmpi::launch

// The decisions of `mpi-launcher run` while the job runs, as pure steps apart from the I/O
// (the coordinator's thread, mpirun's process group, the real clock), so that unit tests
// drive them on a ManualClock's time, with no socket and no child:
//
// - JobTally: what the coordinator's callbacks have learnt of the ranks and hosts, folded in
//   by record_host_lost and record_rank_event. The first failure wins: a rank that failed on
//   its own, a lost host or a misplaced rank is the primary cause; a rank killed by a signal
//   (usually stopped by MPI because of something else, a lost daemon) only a secondary one,
//   but for SIGKILL or SIGBUS before anything else failed: MPI's teardown sends neither first,
//   and the peers' errors that follow (a collective's "connection reset") are its consequence.
// - Supervisor::step: given the tally, the time and whether a stop signal came, what the
//   launcher does next: wait, take the timeout's verdict, end an mpirun that lingers after
//   every rank exited 0, or stop the job (with which grace, saying what).
// - name_misplaced: the misplaced ranks' table and reason, once the job's verdict is known.
//
// run.cpp holds the tally under a mutex (Shared, job_rendezvous.h), copies it each pass, and
// acts on what step() decides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "launcher/failure.h"
#include "launcher/missing_hosts.h"
#include "launcher/preflight.h"
#include "rendezvous/coordinator.h"

namespace tmpi::launch {

// What the coordinator's callbacks learn, read by the main thread.
struct JobTally {
  bool barrier = false;                 // every sidecar registered
  std::optional<std::string> deadline;  // the barrier's deadline passed: who was missing
  std::vector<MissingHost> missing;     // and each of them, as the coordinator saw it (at most 64)
  std::optional<Failure> failure;       // the first rank that failed on its own, or a lost host
  std::optional<Failure> secondary;     // the first rank that was killed by a signal
  int started = 0, exited = 0, failed = 0;
  // Ranks whose agents found them on another host than the hostfile's (agent/placement.h):
  // the preflight's table, printed once the job is stopped; kMaxMisplacedRows of them, and a count.
  std::vector<CheckRow> misplaced;
  int misplaced_count = 0;
};
inline constexpr std::size_t kMaxMisplacedRows = 64;

// The coordinator declared a host lost: the job's failure, unless one came first.
void record_host_lost(JobTally& tally, const std::string& host, const std::string& why);
// An agent's report. True when it is the first failure of its kind (on its own, or by a
// signal): the caller then shows that rank's stderr tail, once a kind.
bool record_rank_event(JobTally& tally, const rdv::RankEvent& event);

// What the job's supervision needs of the launcher's settings.
struct SupervisionOptions {
  int np = 0;
  Millis timeout{0};  // --timeout; 0 = none
  Millis grace{0};    // --grace: mpirun's time to end the job after SIGTERM
};

// A host that cannot answer (lost, or its ssh check failed): no daemon there passes SIGTERM
// on, so the whole grace would only delay the report.
inline constexpr Millis kLostHostGrace(3000);
// mpirun's time to exit after every rank reported its exit 0.
inline constexpr Millis kMpirunLinger(10000);
bool host_unreachable(const Failure& failure);

struct Decision {
  enum class Next {
    kWait,          // look again in a moment
    kTimedOut,      // --timeout passed: record past_timeout() (it names the ranks), then step again
    kEndLingering,  // every rank exited 0, mpirun did not: end it, the job succeeded
    kStop,          // stop mpirun with `grace`: `failure` ended the job
  };
  Next next = Next::kWait;
  std::optional<Failure> failure;
  Millis grace{0};
  std::string says;  // the line to log at error (kStop) or warn (kEndLingering)
};

// One step of the supervision loop: state in, decision out. It keeps only when every rank
// was first seen to have exited 0 (the linger's start).
class Supervisor {
 public:
  Supervisor(const SupervisionOptions& options, std::string launcher, Clock::time_point launched);
  // `stop_code`: 128+N once signal N asked the launcher to stop, else nullopt.
  Decision step(const JobTally& tally, Clock::time_point now, std::optional<int> stop_code);

 private:
  Decision stop(const Failure& failure, const JobTally& tally) const;

  SupervisionOptions options_;
  std::string launcher_;  // "mpirun", "prterun", "mpiexec.hydra": for the lines
  Clock::time_point launched_;
  std::optional<Clock::time_point> all_exited_at_;
};

// When the job failed because ranks ran elsewhere than the hostfile says: its reason, which
// then points at the table, and the table for stderr (with a count past kMaxMisplacedRows).
// Empty, and the failure as it was, otherwise.
std::string name_misplaced(std::optional<Failure>& failure, const JobTally& tally);

}  // namespace tmpi::launch

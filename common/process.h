// Child processes of the launcher: the MPI launcher of the job (in its own process group,
// so that a teardown reaches every local process it started), and short commands whose
// output we read (`mpirun --version`, the placement probe), each under a time limit.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/error.h"

namespace tmpi::launch {

class ProcessGroup {
 public:
  // Starts argv with extra variables set; stdout and stderr are the launcher's.
  static Expected<ProcessGroup> spawn(const std::vector<std::string>& argv,
                                      const std::map<std::string, std::string>& env);
  // The exit status (128+signal for a signal) once it has exited; nullopt while it runs.
  std::optional<int> poll();
  void signal(int sig) const;  // to the whole group
  // SIGTERM, then SIGKILL after `grace` if it has not exited; returns its status.
  int stop(Millis grace);

 private:
  explicit ProcessGroup(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  std::optional<int> status_;
};

// The launcher adopts what its children leave behind. Open MPI's ssh launcher starts each
// ssh in a process group of its own, so ending mpirun's group misses the ssh to a host cut
// off by a partition: no FIN ever reaches it, and it would wait for that host forever
// (cluster.teardown.node-partitioned found one). As a child subreaper (adopt_orphans, once,
// before the first command), the launcher becomes such an orphan's parent, and end_strays,
// called when no command of its own runs, ends (SIGKILL, its group too) and reaps each one.
// Returns how many there were. In a pod the container's end would kill them; in a
// `kubectl exec` shell, or under a supervisor that restarts the launcher, nothing would.
void adopt_orphans();
int end_strays();

// Every process under this one, children first (with adopt_orphans, also what they left
// behind), from /proc; at most 4096.
std::vector<pid_t> descendants();
// Waits until no process is left under this one (reaping each), or SIGKILLs the rest at
// `kill_at`. Only once this process has reaped the children it waits for itself: it reaps
// any child.
void end_descendants(Clock::time_point kill_at);

struct Captured {
  int status = 0;
  std::string output;             // stdout and stderr together
  bool ended_after_done = false;  // `done` held, and the process did not exit by itself
};

// When a captured command has done its work: `done(output)` says so, and the command then
// has `linger` to exit by itself before its process group is ended (status 0). Open MPI 5's
// prterun was seen not to exit after every rank had (under load), which held the
// preflight for its whole timeout.
struct DoneWhen {
  std::function<bool(const std::string& output)> done;
  Millis linger{5000};
};

// Runs argv to completion (killed at `timeout`: Exit::kTempFail) and returns its output.
// `stopped`, asked about every 200 ms, ends it early: the process group is killed and the
// error says so (a SIGTERM to the launcher during its preflight).
Expected<Captured> run_capture(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env, Millis timeout,
                               const std::function<bool()>& stopped = {}, const DoneWhen& when = {});

}  // namespace tmpi::launch

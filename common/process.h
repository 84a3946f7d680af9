// Child processes of the launcher: the MPI launcher of the job (in its own process group,
// so that a teardown reaches every local process it started), and short commands whose
// output we read (`mpirun --version`, the placement probe), each under a time limit.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
  // Starts argv with extra variables set, in a session (and group) of its own; stdout and
  // stderr are the launcher's.
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
// called when no command of its own runs, ends (SIGKILL, its group too) and reaps each one
// that belongs to a session this process started: every command starts in a session of its
// own (ProcessGroup::spawn, run_capture), which what it starts keeps unless it makes its own.
// An orphan of another session is left alone: as PID 1 of its container, the launcher also
// adopts what a person's `kubectl exec` shell left running, and that is not the job's.
// Returns how many it ended. In a pod the container's end would kill them; in a
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

// The soft RLIMIT_NOFILE of a program that serves connections, and of all it starts. The
// rendezvous coordinator's connection cap is the soft limit less a reserve
// (rendezvous/http_server.h): containerd 2's soft 1024 would leave it 960 slots for every
// pod's sidecar and agents, so below kNofileCap the soft limit is raised to the hard one (at
// most kNofileCap). Past kNofileCap it is lowered to it: Open MPI's daemons close every
// descriptor up to the soft limit in each child they fork (ORTE's and PRRTE's
// orte|src/mca/odls/default/odls_default_module.c), and mpirun's start here inherits the
// launcher's limit, so a container's 1 Mi or unlimited would make every start slow.
// capped_nofile: the new soft limit, nullopt to keep it as it is.
inline constexpr std::uint64_t kNofileCap = 65536;
std::optional<std::uint64_t> capped_nofile(std::uint64_t soft, std::uint64_t hard,
                                           std::uint64_t cap = kNofileCap);
// Sets this process's soft limit to capped_nofile's (a debug line says so); called first by
// mpi-launcher and by `mpi-rendezvous serve`, before any listener takes its cap from it.
void fit_descriptor_limit();

// Runs argv to completion (killed at `timeout`: Exit::kTempFail) and returns its output.
// `stopped`, asked about every 200 ms, ends it early: the process group is killed and the
// error says so (a SIGTERM to the launcher during its preflight).
Expected<Captured> run_capture(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env, Millis timeout,
                               const std::function<bool()>& stopped = {}, const DoneWhen& when = {});

}  // namespace tmpi::launch

// See rank_end.h.
#include "agent/rank_end.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "common/process.h"

namespace tmpi::launch {

bool reap_children(pid_t child, int& status) {
  bool rank_ended = false;
  int ended = 0;
  for (pid_t pid = 0; (pid = waitpid(-1, &ended, WNOHANG)) > 0;) {
    if (pid != child) continue;
    status = ended;
    rank_ended = true;
  }
  return rank_ended;
}

bool killed_from_outside(int status) {
  return WIFSIGNALED(status) && (WTERMSIG(status) == SIGKILL || WTERMSIG(status) == SIGBUS);
}

void end_leftovers() {
  std::vector<pid_t> left = descendants();
  if (left.empty()) return;
  for (pid_t pid : left) kill(pid, SIGTERM);
  end_descendants(Clock::now() + kLeftoverGrace);
}

// The MPI daemon that started this agent (orted, prted, hydra_pmi_proxy) waits for a word from
// mpirun that cannot come across the cut: once the rank is ended, it is told to go too, so
// that nothing of the job is left in the pod. Any other parent (a shell) is left alone.
// SIGTERM first: orted then ends its other ranks and removes its session folder (Open MPI 4.1,
// orte/mca/ess/base/ess_base_std_orted.c, shutdown_signal: a forced exit). A daemon that is
// still this agent's parent kOrphanGrace later (its shutdown waiting on the cut link) is
// killed: nobody else in the pod would end it. The agent's own SIGTERM (the daemon ending its
// ranks) stays blocked meanwhile; the daemon's SIGKILL, if it comes, means it is shutting down.
void stop_mpi_daemon() {
  pid_t parent = getppid();
  std::FILE* file = std::fopen(fmt::format("/proc/{}/comm", parent).c_str(), "r");
  if (file == nullptr) return;
  char name[32] = {0};
  bool read = std::fgets(name, sizeof name, file) != nullptr;
  std::fclose(file);
  std::string_view comm(name);
  if (!comm.empty() && comm.back() == '\n') comm.remove_suffix(1);
  if (!read || (comm != "orted" && comm != "prted" && comm != "hydra_pmi_proxy")) return;
  kill(parent, SIGTERM);
  auto until = Clock::now() + kOrphanGrace;
  while (getppid() == parent && Clock::now() < until) std::this_thread::sleep_for(Millis(100));
  if (getppid() == parent) {
    std::fprintf(
        stderr, "mpi-rank: the MPI daemon %s (pid %d) did not end %lld s after SIGTERM: killing it\n",
        std::string(comm).c_str(), static_cast<int>(parent),
        static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kOrphanGrace).count()));
    kill(parent, SIGKILL);
  }
}

}  // namespace tmpi::launch

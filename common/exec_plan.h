// What a forked child runs, made whole before the fork.
//
// Between fork() and exec() the child of a threaded process may call only async-signal-safe
// functions. Another thread may hold a lock at the moment of the fork (the allocator's, the
// environment's), and the child, which has that lock's memory but not its owner, waits for it
// forever. The launcher forks mpirun while its coordinator, its status feed and the ssh check
// beside the launch run threads of their own; a child that called setenv() or built a
// std::vector before exec could hang there. ASan's allocator (gcc 12, clang 14) does not
// guard against this: CI's asan run lost cluster.launcher.rank-fails to a child hung in
// malloc, a launch that never began (1 fork in about 250 hangs so, with busy threads).
//
// So the parent builds the argument list and the whole environment here, and the child only
// execs: ExecPlan::exec() allocates nothing, takes no lock, and uses no stdio.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tmpi::launch {

class ExecPlan {
 public:
  // argv, run with this process's environment and `env` set over it; `last`, when given, is
  // set after everything else (MPICH 4.0's hydra drops the last variable: process.cpp).
  ExecPlan(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
           const std::optional<std::pair<std::string, std::string>>& last = std::nullopt);
  // The child keeps pointers into the strings: an ExecPlan never moves.
  ExecPlan(const ExecPlan&) = delete;
  ExecPlan& operator=(const ExecPlan&) = delete;

  // In the child: execvpe(), searching this process's PATH (no caller sets PATH in `env`);
  // when that fails, one line naming the program on stderr, and _exit(127), as a shell does
  // for a command it cannot run. Async-signal-safe.
  [[noreturn]] void exec() const noexcept;

 private:
  std::vector<std::string> argv_text_;
  std::vector<std::string> env_text_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
  std::string cannot_run_;  // "mpi-launcher: cannot run NAME: "
};

}  // namespace tmpi::launch

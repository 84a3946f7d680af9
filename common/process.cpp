// See process.h.
#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "agent/contract.h"  // the trailer's name: constants only, no link to the agent
#include "common/exec_plan.h"

namespace tmpi::launch {

namespace {

int decode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The launcher's children run with the job's variables, and one of no meaning last of all:
// MPICH 4.0's mpiexec.hydra (Debian 12) never passes the last variable of its own
// environment to the ranks, even when -genvlist names it (TMPI_SLOT_LAYOUT, once last,
// reached no rank; seen in the cluster in a box: `env A=1 B=2 mpiexec.hydra -genvlist A,B
// env` on another host prints A only).
ExecPlan plan_for_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  return {argv, env, std::pair<std::string, std::string>{std::string(contract::kEnvironEnd), "1"}};
}

// In the child, after fork(): a session of its own (and so a process group), the default
// signal actions, then exec. Only async-signal-safe calls (exec_plan.h): the parent has threads.
[[noreturn]] void exec_child(const ExecPlan& plan) {
  setsid();
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) std::signal(signal, SIG_DFL);
  plan.exec();
}

// The sessions of the commands this process started (their leaders' pids): what end_strays
// may end. Bounded: a launcher starts a handful.
std::mutex g_sessions_mutex;
std::vector<pid_t> g_sessions;

bool started_session(pid_t session) {
  std::lock_guard lock(g_sessions_mutex);
  return session > 0 && std::find(g_sessions.begin(), g_sessions.end(), session) != g_sessions.end();
}

// The parent's half of exec_child: the child's session is remembered, and this returns once
// the child leads it (its first step), so that a signal to its group sent at once finds it.
void await_own_session(pid_t child) {
  {
    std::lock_guard lock(g_sessions_mutex);
    if (g_sessions.size() >= 4096) g_sessions.erase(g_sessions.begin());
    g_sessions.push_back(child);
  }
  auto until = Clock::now() + Millis(1000);
  while (getsid(child) != child && Clock::now() < until) sched_yield();
}

}  // namespace

void adopt_orphans() {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

namespace {

// The children of `pid`, every thread's: an orphan is listed as a child of one of its
// subreaper's threads (Linux 3.5+; the file needs CONFIG_PROC_CHILDREN, which Debian's and
// the cloud kernels have). Without it, none is seen, as before.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream children(task.path() / "children");
    for (pid_t child = 0; children >> child;) out.push_back(child);
  }
  return out;
}

}  // namespace

std::vector<pid_t> descendants() {
  std::vector<pid_t> found, parents{getpid()};
  while (!parents.empty() && found.size() < 4096) {  // bounded: a pid reused mid-walk is no loop
    pid_t parent = parents.back();
    parents.pop_back();
    for (pid_t child : children_of(parent)) {
      found.push_back(child);
      parents.push_back(child);
    }
  }
  return found;
}

void end_descendants(Clock::time_point kill_at) {
  for (;;) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (descendants().empty()) return;
    if (Clock::now() >= kill_at) break;
    std::this_thread::sleep_for(Millis(50));
  }
  for (pid_t pid : descendants()) kill(pid, SIGKILL);
  auto until = Clock::now() + Millis(1000);  // reaped, so that none is left a zombie for long
  while (!descendants().empty() && Clock::now() < until) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::this_thread::sleep_for(Millis(10));
  }
}

int end_strays() {
  std::vector<pid_t> strays;
  for (pid_t pid : children_of(getpid())) {
    if (started_session(getsid(pid))) strays.push_back(pid);
  }
  for (pid_t pid : strays) {
    if (getpgid(pid) == pid) kill(-pid, SIGKILL);  // its own group, with whatever it started
    kill(pid, SIGKILL);
  }
  for (pid_t pid : strays) waitpid(pid, nullptr, 0);
  return static_cast<int>(strays.size());
}

Expected<ProcessGroup> ProcessGroup::spawn(const std::vector<std::string>& argv,
                                           const std::map<std::string, std::string>& env) {
  const ExecPlan plan = plan_for_child(argv, env);
  pid_t pid = fork();
  if (pid < 0) return make_error(Exit::kOsErr, "cannot fork: {}", std::strerror(errno));
  if (pid == 0) exec_child(plan);
  await_own_session(pid);
  return ProcessGroup(pid);
}

std::optional<int> ProcessGroup::poll() {
  if (status_) return status_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = decode(status);
  return status_;
}

void ProcessGroup::signal(int sig) const {
  kill(-pid_, sig);
}

int ProcessGroup::stop(Millis grace) {
  if (poll()) return *status_;
  signal(SIGTERM);
  auto end = Clock::now() + grace;
  while (Clock::now() < end) {
    if (poll()) return *status_;
    std::this_thread::sleep_for(Millis(50));
  }
  signal(SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  status_ = decode(status);
  return *status_;
}

Expected<Captured> run_capture(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env, Millis timeout,
                               const std::function<bool()>& stopped, const DoneWhen& when) {
  int out[2];
  const ExecPlan plan = plan_for_child(argv, env);
  if (pipe(out) != 0) return make_error(Exit::kOsErr, "cannot make a pipe: {}", std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {  // never on to waitpid(-1) or kill(-(-1)): that would reach every process of the user
    int error = errno;
    close(out[0]);
    close(out[1]);
    return make_error(Exit::kOsErr, "cannot start {}: fork: {}", argv[0], std::strerror(error));
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    exec_child(plan);
  }
  await_own_session(pid);
  close(out[1]);
  Captured captured;
  auto end = Clock::now() + timeout;
  std::optional<Clock::time_point> done_at;
  char buffer[4096];
  while (true) {
    if (done_at && Clock::now() - *done_at >= when.linger) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(out[0]);
      captured.ended_after_done = true;
      return captured;
    }
    auto left = std::chrono::duration_cast<Millis>(end - Clock::now()).count();
    if (stopped && stopped()) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(out[0]);
      return make_error(Exit::kJobFailed, "{} was stopped: the launcher was asked to stop", argv[0]);
    }
    if (left <= 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(out[0]);
      return make_error(Exit::kTempFail, "{} did not finish in {} s", argv[0], timeout.count() / 1000);
    }
    pollfd fd{out[0], POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(std::min<long>(left, 200))) <= 0) continue;
    ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    captured.output.append(buffer, static_cast<std::size_t>(n));
    if (!done_at && when.done && when.done(captured.output)) done_at = Clock::now();
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  captured.status = decode(status);
  return captured;
}

std::optional<std::uint64_t> capped_nofile(std::uint64_t soft, std::uint64_t hard, std::uint64_t cap) {
  std::uint64_t fitted = std::min(hard, cap);  // RLIM_INFINITY is the largest value, so capped too
  if (soft == fitted) return std::nullopt;
  return fitted;
}

void fit_descriptor_limit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  auto soft = capped_nofile(limit.rlim_cur, limit.rlim_max);
  if (!soft) return;
  std::uint64_t was = limit.rlim_cur;
  limit.rlim_cur = *soft;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0)
    spdlog::debug("descriptor limit: soft nofile {} set to {} (the hard limit, at most {})", was, *soft,
                  kNofileCap);
}

}  // namespace tmpi::launch

// See agent/agent.h. The agent outlives nothing: PR_SET_PDEATHSIG ties it to the MPI daemon
// that started it, and the command to the agent, so that a daemon killed in a teardown
// leaves no rank behind on its node.
#include "agent/agent.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/contract.h"
#include "agent/gate.h"
#include "agent/oom.h"
#include "agent/placement.h"
#include "agent/rank_end.h"
#include "agent/refusals.h"
#include "agent/reports.h"
#include "agent/stderr_tail.h"
#include "common/exec_plan.h"
#include "common/job_key.h"
#include "common/log.h"
#include "common/param_names.h"
#include "common/params.h"
#include "common/process.h"
#include "common/utf8.h"
#include "rendezvous/protocol.h"

namespace tmpi::launch {

using rdv::RankReport;

namespace {

constexpr Millis kStartReportAfter(2000);
// A start report is sent at most this often: one whose answer came late may have been taken,
// and the coordinator takes a repeated one as the same start (coordinator_ranks.cpp).
constexpr int kStartTries = 3;
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};  // passed on to the rank

volatile std::sig_atomic_t g_signal = 0;
void remember_signal(int signal) {
  g_signal = signal;
}
// A SIGCONT, which Open MPI's daemon sends every rank first when it ends them, then SIGTERM
// only odls_base_sigkill_timeout (1 s) later (ORTE's orte/mca/odls/base/odls_base_default_fns.c
// and PRRTE's src/mca/odls/base/odls_base_default_fns.c, kill_local_procs: SIGCONT, sleep,
// SIGTERM, sleep, SIGKILL). It ends nothing by itself (job control sends it too): the agent
// asks the coordinator at once, and again every 200 ms within that second (the daemon may have
// ended the job on its own, before the launcher heard why), and ends its rank only when told
// that the job is ending.
volatile std::sig_atomic_t g_continued = 0;
void remember_continue(int /*signal*/) {
  g_continued = 1;
}

// The coordinator has not answered for lost_after and one beat more, after it had answered
// once: it has counted this host lost and ended the job, or the launcher is gone. Nobody can
// stop this rank any more (the MPI daemon's link may be cut too, with no FIN to tell it), and
// a rank left running on the far side of a partition keeps its GPUs and may still write the
// job's checkpoints. An agent that never reached the coordinator (a NetworkPolicy in the way)
// has no answer to count from, and is not orphaned: the coordinator names its host lost
// instead, as one of the plan never heard from (rendezvous/coordinator.h), and the launcher
// ends the job through MPI.
bool orphaned(const RankAgentOptions& options, std::optional<Clock::time_point> last_contact) {
  return last_contact && Clock::now() - *last_contact >= options.lost_after + options.beat_interval;
}

// What the agent knows of its running rank, and of the coordinator.
struct RankWatch {
  Clock::time_point start;
  int start_tries = 0;       // start reports sent: after one, its exit is reported too
  bool start_taken = false;  // one was taken (or kStartTries were sent): then it beats
  long long beats = 0;
  Clock::time_point next_word{};                  // when the next report or beat is due
  std::optional<Clock::time_point> last_contact;  // the coordinator's last answer
  std::optional<Clock::time_point> orphaned_at;   // when this agent gave the job up (SIGTERM)
  int status = 0;
  bool exited = false, pipe_open = true;
  Clock::time_point exited_at{};
  std::optional<long long> oom_kills_before;  // the cgroup's count as the rank started (agent/oom.h)
  bool superseded = false;  // the launcher runs another attempt now: this rank belongs to none
  bool ending = false;      // the coordinator said the job is ending: the rank gets SIGTERM, once
  // After a SIGCONT, the coordinator is asked again until it says the job is ending, or MPI's
  // daemon's SIGTERM is due (ask_until): Open MPI's daemons end the job on their own when a rank
  // dies (its errmgr), and their SIGCONT can come before the launcher has heard of the death.
  std::optional<Clock::time_point> ask_until;
  Clock::time_point next_ask{};
};

constexpr Millis kAskAfterContinue(900);  // within odls_base_sigkill_timeout (1 s)
constexpr Millis kAskEvery(200);

// A word is due now because of a SIGCONT: the first at once, then every kAskEvery.
bool asking_after_continue(const RankWatch& watch, Clock::time_point now) {
  return watch.ask_until && now < *watch.ask_until && !watch.ending && !watch.exited && now >= watch.next_ask;
}

// When the start is first reported (agent/reports.h): at once for a host's first rank, whose
// word the coordinator expects, 2 s in for the others.
Clock::time_point first_word_due(const RankIdentity& id, Clock::time_point start) {
  return id.local_rank == 0 ? start : start + kStartReportAfter;
}

// The start report, until one is taken (one that did not get through is sent again a beat
// later, briefly, as a beat is; kStartTries in all), then a beat every --beat-interval.
// `now`: a SIGCONT asked for a word before it is due (g_continued).
void keep_in_touch(const RankAgentOptions& options, const RankIdentity& id, RankWatch& watch, bool now) {
  if (watch.exited || (!now && Clock::now() < watch.next_word)) return;
  Heard heard = Heard::kNotHeard;
  if (!watch.start_taken) {
    RankReport started;
    started.event = rdv::RankEventKind::kStart;
    heard = tell(options, id, started, watch.start_tries == 0 ? Millis(3000) : Millis(1000));
    watch.start_taken =
        heard == Heard::kTaken || heard == Heard::kEnding || ++watch.start_tries >= kStartTries;
  } else {
    heard = beat(options, id, ++watch.beats);
  }
  watch.superseded = watch.superseded || heard == Heard::kSuperseded;
  watch.ending = watch.ending || heard == Heard::kEnding;
  if (heard == Heard::kTaken || heard == Heard::kEnding) watch.last_contact = Clock::now();
  watch.next_word = Clock::now() + options.beat_interval;
}

// The coordinator has given this host up (orphaned()), or runs another attempt (a verified 409
// for this epoch): the rank and all it started get SIGTERM, then SIGKILL after kOrphanGrace.
void end_if_orphaned(const RankAgentOptions& options, const RankIdentity& id, RankWatch& watch) {
  if (watch.exited) return;
  if (!watch.orphaned_at && watch.superseded) {
    std::fprintf(stderr,
                 "mpi-rank: rank %d: the launcher at %s runs another attempt of the job now (a restart in "
                 "place): ending this rank of an earlier one\n",
                 id.rank, options.coordinator.c_str());
    for (pid_t pid : descendants()) kill(pid, SIGTERM);
    watch.orphaned_at = Clock::now();
  }
  if (!watch.orphaned_at && orphaned(options, watch.last_contact)) {
    std::fprintf(
        stderr,
        "mpi-rank: rank %d: the launcher at %s has not answered for %lld s (lost-after %lld s): "
        "the job is over; ending this rank\n",
        id.rank, options.coordinator.c_str(),
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - *watch.last_contact).count()),
        static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(options.lost_after).count()));
    for (pid_t pid : descendants()) kill(pid, SIGTERM);  // the rank, and all it started
    watch.orphaned_at = Clock::now();
  }
  if (watch.orphaned_at && Clock::now() - *watch.orphaned_at >= kOrphanGrace) {
    for (pid_t pid : descendants()) kill(pid, SIGKILL);
  }
}

// How long the next ppoll() may wait: until the next report or beat is due, the orphan's
// grace ends, or the 1 s after the exit for its stderr; 20 ms at most without a pidfd.
timespec next_wait(const RankWatch& watch, int exit_fd) {
  auto now = Clock::now();
  auto until = watch.exited ? watch.exited_at + Millis(1000) : std::min(now + Millis(1000), watch.next_word);
  if (watch.ask_until && now < *watch.ask_until && !watch.ending) until = std::min(until, watch.next_ask);
  if (watch.orphaned_at && !watch.exited) until = std::min(until, *watch.orphaned_at + kOrphanGrace);
  auto wait = std::chrono::ceil<Millis>(until - now);
  if (!watch.exited && exit_fd < 0) wait = std::min(wait, Millis(20));
  auto wait_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(wait, Millis(0))).count();
  return timespec{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
}

// Until the child has exited and its stderr closed (or stayed open in a grandchild 1 s past
// the exit): stderr passed through `tail`, reports and beats sent, signals forwarded.
void watch_rank(const RankAgentOptions& options, const RankIdentity& id, pid_t child, int err_fd,
                RankWatch& watch, StderrTail& tail) {
  // The child's end is a file descriptor too (pidfd, Linux 5.3+), so one ppoll() waits for
  // stderr, the exit and the start report's time at once. Without pidfd, the exit is polled
  // every 20 ms. (The raw system call: glibc's wrapper is 2.36+, newer than many images'.)
  int exit_fd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  // The forwarded signals are blocked but while in ppoll(), which they interrupt: one that
  // arrives between the check of g_signal and the wait is not left waiting a whole timeout.
  sigset_t forwarded, waiting;
  sigemptyset(&forwarded);
  for (int signal : kForwarded) sigaddset(&forwarded, signal);
  sigaddset(&forwarded, SIGCONT);
  sigprocmask(SIG_BLOCK, &forwarded, &waiting);
  bool ended_as_told = false;
  // After a kill from outside, the report goes at once, not after stderr's drain: a peer's error
  // (its collective's "connection reset") must not reach the launcher first (supervise.h).
  while (!watch.exited || (watch.pipe_open && !killed_from_outside(watch.status) &&
                           Clock::now() - watch.exited_at < Millis(1000))) {
    if (g_continued != 0) {
      g_continued = 0;
      watch.ask_until = Clock::now() + kAskAfterContinue;
      watch.next_ask = Clock::now();
    }
    const bool asked = asking_after_continue(watch, Clock::now());
    if (asked) watch.next_ask = Clock::now() + kAskEvery;
    keep_in_touch(options, id, watch, asked);
    end_if_orphaned(options, id, watch);
    if (watch.ending && !ended_as_told && !watch.exited) {
      // As MPI's daemon would, a second later: the rank's end is then reported as any other.
      kill(child, SIGTERM);
      ended_as_told = true;
    }
    if (g_signal != 0) {
      if (!watch.exited) kill(child, g_signal);  // once reaped, its pid may be another process's
      g_signal = 0;
    }
    pollfd fds[2] = {{watch.pipe_open ? err_fd : -1, POLLIN, 0}, {watch.exited ? -1 : exit_fd, POLLIN, 0}};
    timespec timeout = next_wait(watch, exit_fd);
    if (ppoll(fds, 2, &timeout, &waiting) < 0) continue;  // EINTR: a signal to forward
    if (fds[0].revents != 0 && !tail.pass_through(err_fd)) watch.pipe_open = false;
    if (!watch.exited && reap_children(child, watch.status)) {
      watch.exited = true;
      watch.exited_at = Clock::now();
    }
  }
  sigprocmask(SIG_SETMASK, &waiting, nullptr);  // the mask as it was: a signal now reaches its handler
  if (exit_fd >= 0) close(exit_fd);
}

// The rank's exit code, reported (or, orphaned, the lost host's code, with nobody to tell).
int finish_rank(const RankAgentOptions& options, const RankIdentity& id, const RankWatch& watch,
                const StderrTail& tail) {
  const int status = watch.status;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (watch.orphaned_at) {  // nobody to report to: the daemon goes too, and the outcome is a lost host's
    end_descendants(*watch.orphaned_at +
                    kOrphanGrace);  // what outlived the rank, SIGKILLed at the grace's end
    stop_mpi_daemon();
    return static_cast<int>(Exit::kTempFail);
  }
  // A rank that exits 0 before its start was due to be reported sends nothing: mpirun's own
  // exit status says it, and the launcher records it so. On 2 shared cores, 16 short ranks'
  // reports cost the job 2% (bench row 1); a failure, or the end of a rank whose start was
  // reported (a host's first rank always), is reported, before this agent exits and so before
  // mpirun ends.
  // A rank ended because the job is ending: what it left goes first, so that its report says
  // that nothing of it runs (a restart in place starts its next attempt on that word). A rank
  // that failed on its own is reported first: its word is the job's cause.
  if (watch.ending) end_leftovers();
  if (code != 0 || watch.start_tries > 0 || watch.start_taken) {
    RankReport exit;
    exit.event = rdv::RankEventKind::kExit;
    exit.code = code;
    exit.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    exit.seconds = std::chrono::duration<double>(Clock::now() - watch.start).count();
    exit.tail = tail.joined();
    if (code != 0) {  // a shell's child OOM-killed ends the shell with 137 and no signal
      OomSeen seen = oom_since(watch.oom_kills_before);
      exit.oom_counted = seen.counted;
      exit.oom_killed = seen.killed;
      exit.memory_limit = seen.memory_limit;
    }
    exit.left_processes = !descendants().empty();  // ended just below, after the report
    report(options, id, exit);
  }
  end_leftovers();  // after the report: the launcher hears the rank's end first
  return code;
}

}  // namespace

int run_rank(const RankAgentOptions& options, const std::map<std::string, std::string>& env,
             const std::vector<std::string>& command) {
  auto id = rank_identity(env);
  if (!id) {
    spdlog::error("{}", id.error().message);
    return static_cast<int>(Exit::kUsage);
  }
  if (auto wrong = misplaced(id->rank, env, hostname())) return refuse_misplaced(options, *id, *wrong);
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // the MPI daemon died: stop this rank
  // The start gate (agent/gate.h) is passed before the forwarded signals are caught: a SIGTERM
  // while the agent waits (mpirun stopped after a failed preflight) ends it at once.
  if (options.start_gate && !options.coordinator.empty()) {
    if (int refused = pass_start_gate(options, *id); refused != 0) return refused;
  }
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : kForwarded) sigaction(signal, &action, nullptr);
  action.sa_handler = remember_continue;
  sigaction(SIGCONT, &action, nullptr);
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return static_cast<int>(Exit::kOsErr);
  RankWatch watch;
  watch.start = Clock::now();
  watch.oom_kills_before = cgroup_oom_kills();
  watch.next_word = first_word_due(*id, watch.start);
  adopt_orphans();  // what the rank leaves behind is this agent's to end (end_leftovers)
  // Built before the fork: the child only execs (common/exec_plan.h).
  const ExecPlan plan(command, torch_env(*id, options.master_addr, options.master_port));
  pid_t child = fork();
  if (child < 0) {
    int error = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    return refuse_unforked(options, *id, error);
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    close(err_pipe[1]);
    plan.exec();
  }
  close(err_pipe[1]);
  StderrTail tail(options.tail_lines);
  watch_rank(options, *id, child, err_pipe[0], watch, tail);
  close(err_pipe[0]);
  return finish_rank(options, *id, watch, tail);
}

Status rank_command(RankCommandOptions options, const std::vector<std::string>& command) {
  RankAgentOptions& agent = options.agent;
  auto key = find_job_key(options.ssh_dir);
  const char* home = std::getenv("HOME");
  if (!key && options.ssh_dir_given && home != nullptr) {
    // The launcher's folder (TMPI_SSH_DIR) first; a node pod that keeps the key in the
    // default place still reports.
    if (auto fallback = find_job_key(std::string(home) + "/.ssh"); fallback) key = std::move(fallback);
  }
  if (key) {
    agent.private_key = std::move(key->text);
  } else if (!agent.coordinator.empty()) {
    // The rank runs, but unreported: said once, so that a failure that names no rank or host
    // has its reason in the output.
    std::fprintf(
        stderr,
        "mpi-rank: this rank cannot report to the launcher at %s: %s; a failure of it will not be named, "
        "and a host none of whose ranks reports is named lost. Point --ssh-dir (%s) at the folder that "
        "holds the job key\n",
        agent.coordinator.c_str(), key.error().message.c_str(), env_name(param::kSshDir.name).c_str());
    agent.coordinator.clear();
  }
  if (command.empty()) return make_error(Exit::kUsage, "no command: mpi-rank -- CMD ARGS...");
  int code = run_rank(agent, current_environment(), command);
  std::cout.flush();
  if (code == 0) return ok_status();
  return Error{job_exit(code), ""};  // the rank's own status, whatever it is
}

}  // namespace tmpi::launch

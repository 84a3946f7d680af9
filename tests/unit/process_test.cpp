// The launcher's child processes (common/process.h): a fork that fails, the orphans that the
// subreaper ends and those it leaves alone, what is said of them, and a captured command
// that is done but does not exit.
#include "common/process.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "launcher/failure.h"

namespace tmpi::launch {
namespace {

// A fork that fails is an error that names it, and run_capture never goes on to waitpid(-1)
// or kill(-(-1)), which would reach every process of the user. The limit
// on processes binds only a uid that is not root, so a child of the test takes uid 4343
// and a limit of 1 process, itself; it says by its exit status what run_capture gave.
TEST(Process, AForkThatFailsIsAnErrorAndSignalsNobody) {
  ASSERT_EQ(getuid(), 0U) << "the unit tests run as root (as the README says): this one takes another uid";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit one{1, 1};
    if (setgid(4343) != 0 || setuid(4343) != 0 || setrlimit(RLIMIT_NPROC, &one) != 0) _exit(10);
    auto ran = run_capture({"true"}, {}, Millis(5000));
    if (ran) _exit(11);  // "true" ran: no limit, nothing proved
    bool named = ran.error().exit == Exit::kOsErr && ran.error().message.find("fork") != std::string::npos;
    _exit(named ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed: signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: could not take uid 4343; 11: the fork worked; 12: not named";
}

// Open MPI starts each ssh in a process group of its own, so ending mpirun's group leaves
// the ssh to a host cut off by a partition (cluster.teardown.node-partitioned found one): the
// launcher adopts such an orphan and ends it. Here the stand-in for mpirun (a shell started as
// the launcher starts mpirun) leaves a stray in a group of its own (perl's setpgrp) holding a
// pipe's only writer; its end is seen as the pipe's EOF. An orphan of a session the launcher
// did not start (a person's `kubectl exec` shell left it) holds another pipe, and is left
// alone. (In a child: the subreaper is for life.)
TEST(Process, AnOrphanOfACommandsSessionIsEndedAndAnotherSessionsIsLeftAlone) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    adopt_orphans();
    int ours[2], theirs[2];
    if (pipe(ours) != 0 || pipe(theirs) != 0) _exit(9);
    pid_t shell = fork();  // the other session's: setsid, start a stray, go
    if (shell == 0) {
      setsid();
      if (fork() == 0) {
        close(theirs[0]);
        close(ours[1]);
        sleep(60);
        _exit(0);
      }
      _exit(0);
    }
    waitpid(shell, nullptr, 0);
    close(theirs[1]);
    auto mpirun =
        ProcessGroup::spawn({"/bin/sh", "-c", "perl -e 'setpgrp; exec @ARGV' sleep 60 & exit 0"}, {});
    if (!mpirun) _exit(8);
    close(ours[1]);
    while (!mpirun->poll()) usleep(10000);
    int ended = end_strays();
    pollfd readable{ours[0], POLLIN, 0};
    char byte = 0;
    ssize_t got = poll(&readable, 1, 5000) > 0 ? read(ours[0], &byte, 1) : -1;
    pollfd other{theirs[0], POLLIN, 0};
    bool other_alive = poll(&other, 1, 200) == 0;  // no EOF: its writer lives
    for (pid_t pid : descendants()) kill(pid, SIGKILL);
    end_descendants(Clock::now());
    if (!other_alive) _exit(20);
    _exit(ended == 1 && got == 0 ? 0 : 10 + ended);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed: signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "8: no spawn; 9: no pipe; 10+N: N strays ended (1 expected), or "
                                       "ours lives on; 20: the other session's orphan was ended";
}

// What the launcher says of the strays it ended, at the default level (info) and at debug.
std::string strays_said(int strays, bool job_failed, spdlog::level::level_enum level) {
  std::ostringstream said;
  auto previous = spdlog::default_logger();
  auto logger =
      std::make_shared<spdlog::logger>("strays", std::make_shared<spdlog::sinks::ostream_sink_st>(said));
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  report_strays(strays, job_failed, "mpirun");
  spdlog::set_default_logger(previous);
  return said.str();
}

TEST(Process, StraysAfterACleanJobAreNoNewsAtInfo) {
  EXPECT_EQ(strays_said(2, false, spdlog::level::info), "") << "a clean job's leftovers read as a fault";
  EXPECT_NE(strays_said(2, false, spdlog::level::debug).find("ended 2 process(es) that mpirun left behind"),
            std::string::npos);
  EXPECT_NE(strays_said(2, true, spdlog::level::info).find("ended 2 process(es) that mpirun left behind"),
            std::string::npos)
      << "after a failure, the leftovers are part of the story";
  EXPECT_EQ(strays_said(0, true, spdlog::level::info), "");
}

// A command that has done its work but does not exit (prterun after its ranks, under load)
// is ended `linger` after `done` held, with status 0 and its output; one that exits by itself
// is waited for as ever.
TEST(Process, ACommandDoneButNotExitingIsEndedAfterItsLinger) {
  DoneWhen said_done{[](const std::string& output) { return output.find("done") != std::string::npos; },
                     Millis(200)};
  auto start = Clock::now();
  auto ran = run_capture({"sh", "-c", "echo done; exec sleep 30"}, {}, Millis(20000), {}, said_done);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_LT(Clock::now() - start, Millis(5000));
  EXPECT_TRUE(ran->ended_after_done);
  EXPECT_EQ(ran->status, 0);
  EXPECT_EQ(ran->output, "done\n");
  auto exited = run_capture({"sh", "-c", "echo done; exit 3"}, {}, Millis(20000), {}, said_done);
  ASSERT_TRUE(exited);
  EXPECT_FALSE(exited->ended_after_done);
  EXPECT_EQ(exited->status, 3);
}

}  // namespace
}  // namespace tmpi::launch

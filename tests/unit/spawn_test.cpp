// The launcher's and the rank agent's children are fork-safe (common/exec_plan.h): between
// fork() and exec() the child allocates nothing, so a lock that another thread held at the
// fork cannot hang it. An allocation there is made certain to show: under the watch
// (alloc_watch.h) it ends the child with exit 99 at once, where it would hang only rarely.
// Threads allocate beside each fork, as the launcher's coordinator and ssh check do.
//
// A test binary of its own: it stands in for glibc's malloc family (outside ASan), which no
// other test should run under.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "alloc_watch.h"
#include "common/process.h"

namespace tmpi::launch {
namespace {

using test::AllocWatch;
using test::kAllocatedInChild;

// Threads that allocate and free until the end of the scope.
class BusyAllocators {
 public:
  explicit BusyAllocators(int count) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this] {
        while (!stop_) {
          std::vector<std::string> words;
          for (int j = 0; j < 64; ++j) words.emplace_back(static_cast<std::size_t>(40 + j * 13), 'x');
        }
      });
    }
  }
  ~BusyAllocators() {
    stop_ = true;
    for (auto& thread : threads_) thread.join();
  }
  BusyAllocators(const BusyAllocators&) = delete;
  BusyAllocators& operator=(const BusyAllocators&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(Spawn, TheWatchSeesAChildThatAllocates) {
  // The watch itself, or every test below proves nothing.
  AllocWatch watch;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<std::string> words(8, std::string(100, 'x'));
    _exit(static_cast<int>(words.size()));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kAllocatedInChild);
}

TEST(Spawn, TheJobsLauncherIsForkedWithoutAnAllocation) {
  BusyAllocators busy(3);
  for (int i = 0; i < 20; ++i) {
    Expected<ProcessGroup> spawned = [] {
      AllocWatch watch;
      return ProcessGroup::spawn({"sh", "-c", "exit 7"}, {{"TMPI_TEST", "1"}});
    }();
    ASSERT_TRUE(spawned) << spawned.error().message;
    auto deadline = Clock::now() + Millis(10000);
    while (!spawned->poll() && Clock::now() < deadline) std::this_thread::sleep_for(Millis(5));
    EXPECT_EQ(spawned->stop(Millis(0)), 7) << "99: the child allocated before exec; 143: it hung";
  }
}

TEST(Spawn, ACapturedCommandIsForkedWithoutAnAllocationAndGetsTheJobsVariablesEndMarkerLast) {
  BusyAllocators busy(3);
  for (int i = 0; i < 20; ++i) {
    AllocWatch watch;
    auto ran = run_capture({"env"}, {{"TMPI_TEST", "yes"}, {"HOME", "/elsewhere"}}, Millis(10000));
    ASSERT_TRUE(ran) << ran.error().message;
    ASSERT_EQ(ran->status, 0) << "99: the child allocated before exec";
    EXPECT_NE(ran->output.find("\nTMPI_TEST=yes\n"), std::string::npos) << ran->output;
    EXPECT_NE(ran->output.find("HOME=/elsewhere\n"), std::string::npos) << "a variable set anew";
    EXPECT_EQ(ran->output.find("TMPI_TEST="), ran->output.rfind("TMPI_TEST=")) << "set once";
    EXPECT_TRUE(ran->output.ends_with("\nTMPI_ENVIRON_END=1\n"))
        << "hydra drops the last variable: " << ran->output;
  }
}

TEST(Spawn, AProgramThatCannotRunIsNamedWithExit127) {
  AllocWatch watch;
  auto ran = run_capture({"tmpi-no-such-program"}, {}, Millis(10000));
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->status, 127);
  EXPECT_EQ(ran->output, "mpi-launcher: cannot run tmpi-no-such-program: No such file or directory\n");
}

TEST(Spawn, TheRankAgentForksItsRankWithoutAnAllocationAndTheTorchVariables) {
  auto out = std::filesystem::temp_directory_path() / ("tmpi-spawn-" + std::to_string(getpid()));
  std::filesystem::remove(out);
  std::map<std::string, std::string> env = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  RankAgentOptions options;  // no coordinator: nothing to report to
  BusyAllocators busy(3);
  int code = 0;
  sigset_t mask_before, mask_after;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask_before);
  {
    AllocWatch watch;
    code = run_rank(options, env, {"sh", "-c", "echo \"$RANK $WORLD_SIZE\" > " + out.string()});
  }
  EXPECT_EQ(code, 0) << "99: the child allocated before exec";
  // The signals it forwards are blocked while it watches the rank, and no longer after: in
  // a process that goes on (this one), a SIGTERM reaches its handler.
  pthread_sigmask(SIG_SETMASK, nullptr, &mask_after);
  for (int signal_number : {SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGQUIT})
    EXPECT_EQ(sigismember(&mask_after, signal_number), sigismember(&mask_before, signal_number))
        << strsignal(signal_number);
  std::string written;
  if (FILE* file = std::fopen(out.c_str(), "r")) {
    char line[64] = {0};
    if (std::fgets(line, sizeof line, file) != nullptr) written = line;
    std::fclose(file);
  }
  EXPECT_EQ(written, "1 2\n") << "the torch variables reach the rank";
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace tmpi::launch

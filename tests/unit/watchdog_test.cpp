// nccl-check's watchdog over its blocking MPI calls (ncclcheck/watchdog.h), without MPI: a
// call that outlives its budget is reported once, with its step; one that returns in time,
// or a watch taken over by the next one, is not; a process stopped meanwhile is seen to have
// stood still about as long as it was stopped.
#include "ncclcheck/watchdog.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tmpi::check {
namespace {

struct Seen {
  std::mutex mutex;
  std::vector<std::pair<std::string, Millis>> calls;
  Millis stood_still{-1};
  void add(const std::string& step, Millis budget, Millis still) {
    std::lock_guard lock(mutex);
    calls.emplace_back(step, budget);
    stood_still = still;
  }
  std::size_t count() {
    std::lock_guard lock(mutex);
    return calls.size();
  }
};

TEST(Watchdog, ACallThatOutlivesItsBudgetIsReportedOnceWithItsStep) {
  Seen seen;
  Watchdog watchdog(
      [&](const std::string& step, Millis budget, Millis still) { seen.add(step, budget, still); });
  // The call "hangs" for four budgets: the watchdog speaks during it, and only once.
  watchdog.guard("MPI_Init", Millis(50), [] { std::this_thread::sleep_for(Millis(200)); });
  ASSERT_EQ(seen.count(), 1U);
  EXPECT_EQ(seen.calls[0].first, "MPI_Init");
  EXPECT_EQ(seen.calls[0].second, Millis(50));
  // A live process: its watchdog ran every tick, so it stood still for no second.
  EXPECT_GE(seen.stood_still, Millis(0));
  EXPECT_LT(seen.stood_still, Millis(1000));
  // Once it has fired, the rank is ending: nothing more is reported.
  watchdog.guard("MPI_Finalize", Millis(20), [] { std::this_thread::sleep_for(Millis(100)); });
  EXPECT_EQ(seen.count(), 1U);
}

TEST(Watchdog, CallsThatReturnInTimeAreNotReported) {
  Seen seen;
  Watchdog watchdog(
      [&](const std::string& step, Millis budget, Millis still) { seen.add(step, budget, still); });
  for (int i = 0; i < 20; ++i) watchdog.guard("init (MPI_Comm_dup)", Millis(200), [] {});
  watchdog.guard("init (MPI_Comm_split)", Millis(300), [] { std::this_thread::sleep_for(Millis(20)); });
  std::this_thread::sleep_for(Millis(500));  // past every budget, disarmed
  EXPECT_EQ(seen.count(), 0U);
}

TEST(Watchdog, ANewWatchReplacesTheOldOnesDeadline) {
  Seen seen;
  Watchdog watchdog(
      [&](const std::string& step, Millis budget, Millis still) { seen.add(step, budget, still); });
  watchdog.arm("first", Millis(100));
  watchdog.arm("second", Millis(400));  // the first's 100 ms no longer count
  std::this_thread::sleep_for(Millis(200));
  EXPECT_EQ(seen.count(), 0U);
  std::this_thread::sleep_for(Millis(400));
  ASSERT_EQ(seen.count(), 1U);
  EXPECT_EQ(seen.calls[0].first, "second");
}

TEST(Watchdog, EndsPromptlyWhileAWatchIsPending) {
  std::atomic<int> fired{0};
  auto start = Clock::now();
  {
    Watchdog watchdog([&](const std::string&, Millis, Millis) { ++fired; });
    watchdog.arm("MPI_Init", Millis(60'000));
  }
  EXPECT_LT(Clock::now() - start, Millis(1000));
  EXPECT_EQ(fired, 0);
}

TEST(Watchdog, BlockingCallsGetTheStepTimeoutButTenSecondsAtLeast) {
  EXPECT_EQ(blocking_budget(Millis(1000)), Millis(10'000));  // start-up costs no fabric's time
  EXPECT_EQ(blocking_budget(Millis(60'000)), Millis(60'000));
}

// A rank whose host was stopped (SIGSTOP) says its line only when mpirun's abort wakes it
// (SIGCONT), long after its deadline: what it says then must show that it stood still.
// A child process stands for the rank, stopped for 1.5 s while a 0.5 s watch runs.
TEST(Watchdog, AProcessStoppedDuringTheWatchIsSeenToHaveStoodStill) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    Watchdog watchdog([&](const std::string&, Millis, Millis still) {
      std::int64_t ms = still.count();
      _exit(write(fds[1], &ms, sizeof ms) == static_cast<ssize_t>(sizeof ms) ? 0 : 1);
    });
    watchdog.guard("MPI_Init", Millis(500), [] { std::this_thread::sleep_for(Millis(4000)); });
    _exit(2);
  }
  close(fds[1]);
  std::this_thread::sleep_for(Millis(100));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  std::this_thread::sleep_for(Millis(1500));
  ASSERT_EQ(kill(child, SIGCONT), 0);
  std::int64_t ms = 0;
  ASSERT_EQ(read(fds[0], &ms, sizeof ms), static_cast<ssize_t>(sizeof ms));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GE(ms, 1300) << "stood still for " << ms << " ms";
  EXPECT_LT(ms, 4000) << "stood still for " << ms << " ms";
}

}  // namespace
}  // namespace tmpi::check

// nccl-check's watchdog over its blocking MPI calls (ncclcheck/watchdog.h), without MPI: a
// call that outlives its budget is reported once, with its step; one that returns in time,
// or a watch taken over by the next one, is not.
#include "ncclcheck/watchdog.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tmpi::check {
namespace {

struct Seen {
  std::mutex mutex;
  std::vector<std::pair<std::string, Millis>> calls;
  void add(const std::string& step, Millis budget) {
    std::lock_guard lock(mutex);
    calls.emplace_back(step, budget);
  }
  std::size_t count() {
    std::lock_guard lock(mutex);
    return calls.size();
  }
};

TEST(Watchdog, ACallThatOutlivesItsBudgetIsReportedOnceWithItsStep) {
  Seen seen;
  Watchdog watchdog([&](const std::string& step, Millis budget) { seen.add(step, budget); });
  // The call "hangs" for four budgets: the watchdog speaks during it, and only once.
  watchdog.guard("MPI_Init", Millis(50), [] { std::this_thread::sleep_for(Millis(200)); });
  ASSERT_EQ(seen.count(), 1U);
  EXPECT_EQ(seen.calls[0].first, "MPI_Init");
  EXPECT_EQ(seen.calls[0].second, Millis(50));
  // Once it has fired, the rank is ending: nothing more is reported.
  watchdog.guard("MPI_Finalize", Millis(20), [] { std::this_thread::sleep_for(Millis(100)); });
  EXPECT_EQ(seen.count(), 1U);
}

TEST(Watchdog, CallsThatReturnInTimeAreNotReported) {
  Seen seen;
  Watchdog watchdog([&](const std::string& step, Millis budget) { seen.add(step, budget); });
  for (int i = 0; i < 20; ++i) watchdog.guard("init (MPI_Comm_dup)", Millis(200), [] {});
  watchdog.guard("init (MPI_Comm_split)", Millis(300), [] { std::this_thread::sleep_for(Millis(20)); });
  std::this_thread::sleep_for(Millis(500));  // past every budget, disarmed
  EXPECT_EQ(seen.count(), 0U);
}

TEST(Watchdog, ANewWatchReplacesTheOldOnesDeadline) {
  Seen seen;
  Watchdog watchdog([&](const std::string& step, Millis budget) { seen.add(step, budget); });
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
    Watchdog watchdog([&](const std::string&, Millis) { ++fired; });
    watchdog.arm("MPI_Init", Millis(60'000));
  }
  EXPECT_LT(Clock::now() - start, Millis(1000));
  EXPECT_EQ(fired, 0);
}

TEST(Watchdog, BlockingCallsGetTheStepTimeoutButTenSecondsAtLeast) {
  EXPECT_EQ(blocking_budget(Millis(1000)), Millis(10'000));  // start-up costs no fabric's time
  EXPECT_EQ(blocking_budget(Millis(60'000)), Millis(60'000));
}

}  // namespace
}  // namespace tmpi::check

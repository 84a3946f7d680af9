// The clocks of common/clock.h: the real one waits for its deadline or a notification; the
// manual one moves only when told, wakes exactly the waiters whose deadline it passed, and
// its autopilot jumps to the earliest deadline once every thread sleeps, but never while
// one of them still runs for real. The reporter's and the sidecar's tests lean on this.
#include "common/clock.h"

#include <atomic>

#include <gtest/gtest.h>

namespace tmpi {
namespace {

using namespace std::chrono_literals;

TEST(RealTime, WaitsForTheDeadlineOrThePredicate) {
  std::mutex mutex;
  std::condition_variable cv;
  std::unique_lock lock(mutex);
  auto start = Clock::now();
  EXPECT_FALSE(real_time().wait_until(cv, lock, start + 20ms, [] { return false; }));
  EXPECT_GE(Clock::now() - start, 20ms);
  EXPECT_TRUE(real_time().wait_until(cv, lock, Clock::now() + 10s, [] { return true; }));
  EXPECT_LT(Clock::now() - start, 5s);
}

// Waits on the clock from another thread, for `done` or `span` of the clock's time.
struct Waiting {
  Waiting(ManualClock& clock, Clock::duration span) {
    thread = std::thread([this, &clock, until = clock.now() + span] {
      std::unique_lock lock(mutex);
      result = clock.wait_until(cv, lock, until, [this] { return done; }) ? 1 : 0;
    });
  }
  ~Waiting() { thread.join(); }
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::atomic<int> result{-1};
  std::thread thread;
};

// Real time, only to let another thread reach its wait: the manual clock does not move.
bool soon(const std::function<bool()>& pred) {
  for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(2ms);
  return pred();
}

TEST(ManualClock, AdvancingWakesAWaiterOnlyAtItsDeadline) {
  ManualClock clock;
  auto start = clock.now();
  Waiting waiting(clock, 100ms);
  ASSERT_TRUE(soon([&] { return clock.sleepers() == 1; }));
  clock.advance(60ms);
  ASSERT_TRUE(soon([&] { return clock.sleepers() == 1; })) << "woke, then did not wait again";
  EXPECT_EQ(waiting.result.load(), -1);
  clock.advance(40ms);
  ASSERT_TRUE(soon([&] { return waiting.result.load() != -1; }));
  EXPECT_EQ(waiting.result.load(), 0);  // the deadline passed, `done` never came
  EXPECT_EQ(clock.now() - start, 100ms);
}

TEST(ManualClock, ANotificationWakesAWaiterBeforeItsDeadline) {
  ManualClock clock;
  auto start = clock.now();
  Waiting waiting(clock, 1h);
  ASSERT_TRUE(soon([&] { return clock.sleepers() == 1; }));
  {
    std::lock_guard lock(waiting.mutex);
    waiting.done = true;
  }
  clock.notify_all(waiting.cv);
  EXPECT_EQ(clock.sleepers(), 0U) << "a notified thread still counts as asleep";
  ASSERT_TRUE(soon([&] { return waiting.result.load() != -1; }));
  EXPECT_EQ(waiting.result.load(), 1);
  EXPECT_EQ(clock.now(), start);
}

TEST(ManualClock, TheAutopilotJumpsToTheEarliestDeadlineOnceAllSleep) {
  ManualClock clock;
  auto start = clock.now();
  clock.autopilot(2);
  std::atomic<Clock::time_point> other_woke{};
  std::thread other([&] {
    clock.sleep_for(5s);
    other_woke = clock.now();
  });
  clock.sleep_for(1s);
  EXPECT_EQ(clock.now() - start, 1s);
  clock.depart();  // this thread stops taking part: the other one alone moves the time
  other.join();
  EXPECT_EQ(other_woke.load() - start, 5s);
}

TEST(ManualClock, TheAutopilotHoldsTheTimeWhileAThreadRunsForReal) {
  ManualClock clock;
  clock.autopilot(2);
  std::atomic<bool> worked{false};
  std::thread worker([&] {
    std::this_thread::sleep_for(20ms);  // a request over a socket, say
    worked = true;
    clock.sleep_for(1s);
  });
  clock.sleep_for(10ms);
  EXPECT_TRUE(worked.load()) << "the time moved while the worker was busy";
  clock.depart();  // this thread stops taking part, to join the worker
  worker.join();
}

}  // namespace
}  // namespace tmpi

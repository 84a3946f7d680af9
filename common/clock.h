// Time, injected. What waits on its own thread (status::StatusReporter, rdv::Sidecar) and
// Deadline read the time and block on it through a TimeSource, as rdv::Coordinator takes
// `now` as an argument: the programs get real_time(), the steady clock as before, and tests
// a ManualClock, whose time moves only when the test (or its autopilot) moves it, so that an
// interval, a backoff or a deadline passes in no real time and the tests stop sleeping.
//
// A wait goes through the source together with the condition variable it uses, because a
// worker that waits for "a new state, or the interval, whichever comes first" must be woken
// by both: by a notification, and by the real or manual time reaching its deadline. The
// notifications go through the source too, so that a manual clock knows that the thread it
// wakes is no longer asleep (its autopilot moves the time only while all of them are).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tmpi {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Whole milliseconds from `from` to `to`, as the coordinator's tables and lines show an age.
inline long long ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<Millis>(to - from).count();
}

class TimeSource {
 public:
  TimeSource() = default;
  TimeSource(const TimeSource&) = delete;
  TimeSource& operator=(const TimeSource&) = delete;
  virtual ~TimeSource() = default;

  virtual Clock::time_point now() const = 0;
  // Blocks on cv (lock held on entry and on return) until it is notified, wakes spuriously,
  // or this source's time reaches `until` (Clock::time_point::max(): never). One wake, like
  // std::condition_variable::wait_until: the caller looks again at what it waits for.
  virtual void wait_once(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         Clock::time_point until) = 0;
  // cv.notify_all(), for the waits above.
  virtual void notify_all(std::condition_variable& cv) = 0;

  void wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock) {
    wait_once(cv, lock, Clock::time_point::max());
  }
  // Until pred() holds (true) or `until` passes (false).
  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Clock::time_point until,
                  const std::function<bool()>& pred) {
    while (!pred()) {
      if (now() >= until) return false;
      wait_once(cv, lock, until);
    }
    return true;
  }
};

class RealTime final : public TimeSource {
 public:
  Clock::time_point now() const override { return Clock::now(); }
  void wait_once(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Clock::time_point until) override {
    // No wait_until(max): the conversion to the C library's timespec may overflow.
    if (until == Clock::time_point::max()) {
      cv.wait(lock);
    } else {
      cv.wait_until(lock, until);
    }
  }
  void notify_all(std::condition_variable& cv) override { cv.notify_all(); }
};

// The one real clock, every constructor's default.
inline TimeSource& real_time() {
  static RealTime clock;
  return clock;
}

// A clock for tests. Its time moves only by advance() or by the autopilot, and each move
// wakes every thread waiting on it, which then looks at the time again. A thread waiting on
// it "sleeps" from the moment it has seen the current time until it is woken.
class ManualClock final : public TimeSource {
 public:
  // An hour after the epoch, as a steady clock might read: code that computes "a probe
  // interval ago" at the start gets a time point after the epoch, as it would for real.
  explicit ManualClock(Clock::time_point start = Clock::time_point(std::chrono::hours(1)));
  ~ManualClock() override;  // every wait on it must have returned: destroy its users first

  Clock::time_point now() const override;
  void wait_once(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 Clock::time_point until) override;
  void notify_all(std::condition_variable& cv) override;

  void advance(Clock::duration by);
  // The calling thread's own pause, on this clock (a test's, or a fake transport's stall).
  void sleep_until(Clock::time_point until);
  void sleep_for(Clock::duration span) { sleep_until(now() + span); }
  // From now on, whenever `threads` threads sleep on this clock (the test's own thread
  // included, when it waits on the clock), a thread of the clock's own moves the time to
  // the earliest of their deadlines: a discrete-event simulation, in which nothing can
  // happen in between, since every thread that could act is asleep. Threads that run for
  // real meanwhile (a request over a socket) hold the time still until they sleep again.
  void autopilot(std::size_t threads);
  // The calling thread will not wait on this clock again (it is about to end): from now on
  // the autopilot waits for one thread fewer.
  void depart();
  std::size_t sleepers() const;

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mutex;  // the caller's, held while it decides to wait
    Clock::time_point until;
    bool asleep;
  };
  void advance_to(Clock::time_point when);
  std::size_t asleep() const;  // under mutex_

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a waiter came, went or woke; a round of wake-ups ended
  Clock::time_point now_;
  std::vector<Waiter*> waiters_;
  int waking_ = 0;  // rounds of wake-ups under way, which read waiters_ without mutex_
  std::size_t pilot_threads_ = 0;
  bool stopping_ = false;
  std::thread pilot_;
};

// A wall-clock time as the Kubernetes API writes one (RFC 3339, UTC, seconds):
// "2026-11-30T01:55:03Z".
std::string rfc3339(std::chrono::system_clock::time_point when);

}  // namespace tmpi

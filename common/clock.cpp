// See clock.h. The manual clock's one subtle part is waking its waiters without losing a
// wake-up or touching a condition variable that is gone:
//   - A waiter decides to wait (the time is before its deadline) and registers under its
//     own mutex, then waits on its condition variable, which releases that mutex at once.
//     advance() sets the time first and then takes each waiter's mutex before notifying:
//     so a waiter either saw the new time, or is already waiting when it is notified.
//   - advance() reads the waiters' condition variables and mutexes without mutex_ (taking
//     a waiter's mutex under mutex_ would deadlock against a waiter registering under its
//     own); a waiter therefore leaves the list only when no round of wake-ups is under way,
//     and before that it lets go of its own mutex, which such a round may be waiting for.
#include "common/clock.h"

#include <algorithm>
#include <ctime>

namespace tmpi {

ManualClock::ManualClock(Clock::time_point start) : now_(start) {}

ManualClock::~ManualClock() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (pilot_.joinable()) pilot_.join();
}

Clock::time_point ManualClock::now() const {
  std::lock_guard guard(mutex_);
  return now_;
}

void ManualClock::wait_once(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            Clock::time_point until) {
  Waiter self{&cv, lock.mutex(), until, true};
  {
    std::lock_guard guard(mutex_);
    if (now_ >= until) return;
    waiters_.push_back(&self);
  }
  changed_.notify_all();  // the autopilot counts the sleepers
  cv.wait(lock);
  lock.unlock();
  {
    std::unique_lock guard(mutex_);
    changed_.wait(guard, [this] { return waking_ == 0; });
    std::erase(waiters_, &self);
  }
  changed_.notify_all();
  lock.lock();
}

void ManualClock::notify_all(std::condition_variable& cv) {
  {
    std::lock_guard guard(mutex_);
    for (Waiter* waiter : waiters_) {
      if (waiter->cv == &cv) waiter->asleep = false;  // it runs from now on, until it waits again
    }
  }
  cv.notify_all();
}

void ManualClock::advance(Clock::duration by) {
  advance_to(now() + by);
}

void ManualClock::advance_to(Clock::time_point when) {
  std::vector<Waiter> round;
  {
    std::lock_guard guard(mutex_);
    now_ = std::max(now_, when);
    for (Waiter* waiter : waiters_) {
      waiter->asleep = false;
      round.push_back(*waiter);
    }
    ++waking_;
  }
  for (const Waiter& waiter : round) {
    { std::lock_guard wait_for_it(*waiter.mutex); }  // it is waiting, or will see the new time
    waiter.cv->notify_all();
  }
  {
    std::lock_guard guard(mutex_);
    --waking_;
  }
  changed_.notify_all();
}

void ManualClock::sleep_until(Clock::time_point until) {
  std::mutex mutex;
  std::condition_variable cv;
  std::unique_lock lock(mutex);
  while (now() < until) wait_once(cv, lock, until);
}

std::size_t ManualClock::asleep() const {
  return std::count_if(waiters_.begin(), waiters_.end(), [](const Waiter* w) { return w->asleep; });
}

std::size_t ManualClock::sleepers() const {
  std::lock_guard guard(mutex_);
  return asleep();
}

void ManualClock::depart() {
  {
    std::lock_guard guard(mutex_);
    if (pilot_threads_ > 0) --pilot_threads_;
  }
  changed_.notify_all();
}

void ManualClock::autopilot(std::size_t threads) {
  {
    std::lock_guard guard(mutex_);
    pilot_threads_ = threads;
  }
  changed_.notify_all();
  if (pilot_.joinable()) return;
  pilot_ = std::thread([this] {
    std::unique_lock guard(mutex_);
    while (true) {
      auto earliest = Clock::time_point::max();
      changed_.wait(guard, [&] {
        if (stopping_) return true;
        if (asleep() < std::max<std::size_t>(pilot_threads_, 1)) return false;
        earliest = Clock::time_point::max();
        for (const Waiter* waiter : waiters_) {
          if (waiter->asleep) earliest = std::min(earliest, waiter->until);
        }
        return earliest != Clock::time_point::max();  // all asleep with no deadline: a test's bug
      });
      if (stopping_) return;
      guard.unlock();
      advance_to(earliest);
      guard.lock();
    }
  });
}

std::string rfc3339(std::chrono::system_clock::time_point when) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace tmpi

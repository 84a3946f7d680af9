// See watchdog.h.
#include "ncclcheck/watchdog.h"

#include <algorithm>

namespace tmpi::check {

namespace {

constexpr Millis kLeastBlockingBudget(10'000);

}  // namespace

Watchdog::Watchdog(Expired on_expiry) : on_expiry_(std::move(on_expiry)), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Watchdog::arm(std::string step, Millis budget) {
  {
    std::lock_guard lock(mutex_);
    step_ = std::move(step);
    budget_ = budget;
    last_awake_ = Clock::now();
    due_ = last_awake_ + budget;
    stood_still_ = Millis(0);
    armed_ = true;
  }
  changed_.notify_all();
}

void Watchdog::disarm() {
  {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }
  changed_.notify_all();
}

void Watchdog::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_ || fired_) {
      changed_.wait(lock);
      continue;
    }
    auto now = Clock::now();
    stood_still_ = std::max(stood_still_, std::chrono::duration_cast<Millis>(now - last_awake_));
    last_awake_ = now;
    if (now < due_) {
      changed_.wait_until(lock, std::min(due_, now + kTick));
      continue;  // re-read: disarmed, re-armed or stopping meanwhile
    }
    fired_ = true;
    std::string step = step_;
    Millis budget = budget_;
    Millis stood_still = stood_still_;
    lock.unlock();  // the callback may take seconds (it waits for its peers' last words)
    on_expiry_(step, budget, stood_still);
    lock.lock();
  }
}

Millis blocking_budget(Millis step_timeout) {
  return std::max(step_timeout, kLeastBlockingBudget);
}

}  // namespace tmpi::check

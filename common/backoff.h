// Retry discipline shared by every client (Kubernetes API, Trainer status, the sidecar's
// registration), after PyTorch's TCPStore: one overall deadline for the whole operation,
// and exponential backoff with "equal jitter" between attempts (each wait uniform in
// [cap/2, cap]: never at once, never in step), so that a thousand pods that failed together
// do not retry together. A Deadline reads the time from a TimeSource (clock.h): the real
// one unless a test passes its manual clock.
#pragma once

#include <algorithm>
#include <random>

#include "common/clock.h"

namespace tmpi {

class Deadline {
 public:
  explicit Deadline(Millis budget, const TimeSource& clock = real_time())
      : clock_(&clock), end_(clock.now() + budget), budget_(budget) {}
  bool expired() const { return clock_->now() >= end_; }
  Millis remaining() const {
    auto left = std::chrono::duration_cast<Millis>(end_ - clock_->now());
    return left.count() > 0 ? left : Millis(0);
  }
  Millis budget() const { return budget_; }

 private:
  const TimeSource* clock_;  // a pointer, not a reference: a Deadline stays a value, assignable
  Clock::time_point end_;
  Millis budget_;
};

class Backoff {
 public:
  Backoff(Millis initial, Millis max) : next_(initial), max_(max), rng_(std::random_device{}()) {}

  // The wait before the next attempt: uniform in [cap/2, cap], where cap doubles each time
  // up to max. Half the cap is kept so that a retry never comes at once.
  Millis next() {
    Millis cap = next_;
    next_ = std::min(max_, next_ * 2);
    std::uniform_int_distribution<long> pick(cap.count() / 2, cap.count());
    return Millis(pick(rng_));
  }

 private:
  Millis next_, max_;
  std::mt19937 rng_;
};

}  // namespace tmpi

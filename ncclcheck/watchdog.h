// The guard over nccl-check's blocking MPI calls. Every wait of a measured step is polled
// against a deadline (progress.h), but a few calls cannot be: MPI_Init, the communicators'
// creation (MPI_Comm_dup, MPI_Comm_split) and MPI_Finalize block until every rank of the
// job takes part. A peer that never arrives (its host stopped or gone, its rank never
// started) holds every other rank inside such a call for good, and the whole check waits
// on the launcher's last-resort timeout, twenty step timeouts later.
//
// So a thread watches the call: arm() before it, disarm() after. A call that is still
// running when its budget has passed calls on_expiry(step, budget, stood_still) from the
// watchdog's thread; nccl-check's callback (main.cpp) says so on one line that the launcher reads
// ("nccl-check timeout: {...}"), waits for its peers to say theirs, and ends the rank with
// exit 75. The launcher then names as silent the ranks that said nothing
// (launcher/fabric_check.cpp). Nothing here touches MPI: unit tests drive it.
//
// A rank of a stopped host says something too, late: mpirun's abort sends its ranks SIGCONT
// before SIGTERM, and its watchdog, due long before, fires at once. So while armed the
// thread wakes every kTick and keeps the longest time it went without running
// (`stood_still`): a frozen process shows the seconds it stood still, a live one on a busy
// machine a fraction of one, and the launcher counts the first as silent.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"

namespace tmpi::check {

class Watchdog {
 public:
  // Called at most once, from the watchdog's thread, with the step, its budget, and the
  // longest time the thread went without running while the step was watched.
  using Expired = std::function<void(const std::string& step, Millis budget, Millis stood_still)>;
  static constexpr Millis kTick{200};

  explicit Watchdog(Expired on_expiry);
  ~Watchdog();  // stops the thread; a callback under way is waited for
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches `step` for `budget` from now, in place of whatever was armed before.
  void arm(std::string step, Millis budget);
  void disarm();

  // arm(), then `call`, then disarm(): one blocking call under the watch.
  template <typename Call>
  void guard(std::string step, Millis budget, Call&& call) {
    arm(std::move(step), budget);
    std::forward<Call>(call)();
    disarm();
  }

 private:
  void watch();

  Expired on_expiry_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false, fired_ = false, stopping_ = false;
  std::string step_;
  Millis budget_{0};
  Clock::time_point due_{};
  Clock::time_point last_awake_{};  // when the thread last ran, while armed
  Millis stood_still_{0};
  std::thread thread_;  // last: it starts once the rest is in place
};

// The budget of a blocking call at start-up or shutdown: the step timeout, but 10 s at
// least. MPI_Init on a loaded node, or under sanitizers, takes seconds that no fabric
// costs; a short step timeout that suits a transfer would otherwise stop a healthy start.
Millis blocking_budget(Millis step_timeout);

}  // namespace tmpi::check

// Every wait in nccl-check goes through here, so that nothing hangs (docs/design.md,
// nccl-check): MPI requests are polled against a deadline, never waited on. While it polls,
// a rank also answers liveness pings: a rank whose deadline has passed pings every other
// rank, and names the hosts of those that stay silent (stopped, dead, or behind a broken
// link) before it aborts the job.
//
// Buffer lifetime. A request that missed its deadline is still pending: MPI may read or
// write its buffers at any later MPI call (the pings after a timeout, MPI_Abort), and a
// peer may still copy from them (shared memory's single copy). So whoever starts a
// non-blocking call hands its buffers to wait() as Held pointers; when the wait fails,
// Progress keeps them until the process ends (the job is aborted next). No pending request
// ever points at freed memory, on any path.
//
// The few calls that cannot be polled (a communicator's creation) go through blocking(),
// under the watchdog (watchdog.h).
//
// MPI is used from one thread only (MPI_THREAD_SINGLE is enough).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/backoff.h"
#include "common/error.h"
#include "ncclcheck/watchdog.h"

namespace tmpi::check {

// A buffer that a pending MPI request may use: shared, so that Progress can keep it.
using Held = std::shared_ptr<const void>;

template <typename T>
std::shared_ptr<std::vector<T>> held_buffer(std::size_t count, T value = T{}) {
  return std::make_shared<std::vector<T>>(count, value);
}

class Progress {
 public:
  // Duplicates `world` for the pings, under the watchdog for `blocking_budget`; blocking()
  // calls get the same budget.
  Progress(MPI_Comm world, Watchdog& watchdog, Millis blocking_budget);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Polls until every request completes; after the deadline, an Exit::kTempFail error that
  // names `step`. The requests are left pending then, and Progress keeps `buffers` (every
  // buffer the requests use) for good: the caller aborts the job.
  // A measurement spins (kSpin), as MPI's own blocking calls do; bookkeeping sleeps a little
  // between polls (kYield), so that a rank with nothing to measure in a round leaves the CPU
  // to those that have, where ranks share cores.
  enum class Poll { kSpin, kYield };
  Status wait(MPI_Request* requests, int count, std::vector<Held> buffers, const Deadline& deadline,
              std::string_view step, Poll poll = Poll::kSpin);

  // A blocking MPI call (MPI_Comm_split, ...) under the watchdog, as step "`step` (`what`)".
  template <typename Call>
  void blocking(std::string_view step, std::string_view what, Call&& call) {
    watchdog_.guard(std::string(step) + " (" + std::string(what) + ")", blocking_budget_,
                    std::forward<Call>(call));
  }

  // How many buffers failed waits have left to Progress (they are never freed).
  std::size_t abandoned() const { return abandoned_.size(); }
  // How many waits reached their deadline with requests still pending, with or without
  // buffers: their communicators must outlive them too.
  std::size_t failed_waits() const { return failed_waits_; }

  // Answers the pings that have arrived. wait() calls it; so do other polling loops (the
  // NCCL backend's, while a CUDA stream runs).
  void serve();

  // After a timeout: pings every other rank and returns the ranks that did not answer
  // within `patience`.
  std::vector<int> silent_ranks(Millis patience);

 private:
  Watchdog& watchdog_;
  Millis blocking_budget_;
  MPI_Comm live_ = MPI_COMM_NULL;  // a duplicate of the world, for pings only
  int rank_ = 0, size_ = 1;
  Clock::time_point last_served_;
  std::vector<Held> abandoned_;  // buffers of requests still pending after a failed wait
  std::size_t failed_waits_ = 0;
};

// Every rank's `text` (up to 1023 bytes each), in rank order, from a non-blocking
// all-gather over `comm`.
Expected<std::vector<std::string>> allgather_text(Progress& progress, MPI_Comm comm, const std::string& text,
                                                  const Deadline& deadline, std::string_view step);

// The sum over `comm` of each value, non-blocking.
Status allreduce_sum(Progress& progress, MPI_Comm comm, std::vector<double>& values, const Deadline& deadline,
                     std::string_view step);

}  // namespace tmpi::check

// See progress.h.
#include "ncclcheck/progress.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace tmpi::check {

namespace {

constexpr int kPingTag = 1;
constexpr int kPongTag = 2;
constexpr Millis kServeEvery(5);  // an MPI_Iprobe per poll would slow the small sizes
constexpr std::size_t kTextBytes = 1024;

}  // namespace

Progress::Progress(MPI_Comm world, Watchdog& watchdog, Millis blocking_budget)
    : watchdog_(watchdog), blocking_budget_(blocking_budget), last_served_(Clock::now()) {
  blocking("init", "MPI_Comm_dup", [&] { MPI_Comm_dup(world, &live_); });
  MPI_Comm_rank(live_, &rank_);
  MPI_Comm_size(live_, &size_);
}

Progress::~Progress() {
  if (live_ != MPI_COMM_NULL) MPI_Comm_free(&live_);
}

void Progress::serve() {
  last_served_ = Clock::now();
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, live_, &arrived, &status);
    if (arrived == 0) return;
    int ping = 0;
    MPI_Recv(&ping, 1, MPI_INT, status.MPI_SOURCE, kPingTag, live_, MPI_STATUS_IGNORE);
    MPI_Send(&rank_, 1, MPI_INT, status.MPI_SOURCE, kPongTag, live_);  // one int: sent eagerly
  }
}

Status Progress::wait(MPI_Request* requests, int count, std::vector<Held> buffers, const Deadline& deadline,
                      std::string_view step, Poll poll) {
  for (;;) {
    int done = 0;
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (done != 0) return ok_status();
    if (poll == Poll::kYield) std::this_thread::sleep_for(std::chrono::microseconds(200));
    auto now = Clock::now();
    if (now - last_served_ >= kServeEvery) {
      serve();
      if (deadline.expired()) {
        abandoned_.insert(abandoned_.end(), buffers.begin(), buffers.end());
        ++failed_waits_;
        return make_error(Exit::kTempFail, "{} did not finish within {} s", step,
                          std::chrono::duration<double>(deadline.budget()).count());
      }
    }
  }
}

std::vector<int> Progress::silent_ranks(Millis patience) {
  // The receives of silent peers stay pending when this returns: their buffer is kept.
  auto pongs = held_buffer<int>(static_cast<std::size_t>(size_), -1);
  abandoned_.push_back(pongs);
  std::vector<MPI_Request> receives;
  std::vector<int> peers;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request send;
    MPI_Isend(&rank_, 1, MPI_INT, peer, kPingTag, live_, &send);
    MPI_Request_free(&send);  // a stopped peer never takes it; that is the point
    MPI_Request receive;
    MPI_Irecv(&(*pongs)[static_cast<std::size_t>(peer)], 1, MPI_INT, peer, kPongTag, live_, &receive);
    receives.push_back(receive);
    peers.push_back(peer);
  }
  Deadline deadline(patience);
  std::vector<bool> answered(peers.size(), false);
  while (!deadline.expired() && std::find(answered.begin(), answered.end(), false) != answered.end()) {
    for (std::size_t i = 0; i < receives.size(); ++i) {
      if (answered[i]) continue;
      int done = 0;
      MPI_Test(&receives[i], &done, MPI_STATUS_IGNORE);
      answered[i] = done != 0;
    }
    serve();
    std::this_thread::sleep_for(Millis(1));
  }
  std::vector<int> silent;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (!answered[i]) silent.push_back(peers[i]);
  }
  return silent;  // the pending receives end with the job, which aborts next
}

Expected<std::vector<std::string>> allgather_text(Progress& progress, MPI_Comm comm, const std::string& text,
                                                  const Deadline& deadline, std::string_view step) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  auto mine = held_buffer<char>(kTextBytes, '\0');
  std::memcpy(mine->data(), text.data(), std::min(text.size(), kTextBytes - 1));
  auto all = held_buffer<char>(kTextBytes * static_cast<std::size_t>(size), '\0');
  MPI_Request request;
  MPI_Iallgather(mine->data(), static_cast<int>(kTextBytes), MPI_CHAR, all->data(),
                 static_cast<int>(kTextBytes), MPI_CHAR, comm, &request);
  TMPI_CHECK(progress.wait(&request, 1, {mine, all}, deadline, step, Progress::Poll::kYield));
  std::vector<std::string> out;
  out.reserve(size);
  for (int i = 0; i < size; ++i) out.emplace_back(all->data() + kTextBytes * static_cast<std::size_t>(i));
  return out;
}

Status allreduce_sum(Progress& progress, MPI_Comm comm, std::vector<double>& values, const Deadline& deadline,
                     std::string_view step) {
  auto sums = std::make_shared<std::vector<double>>(values);  // the caller's vector may not outlive a timeout
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, sums->data(), static_cast<int>(sums->size()), MPI_DOUBLE, MPI_SUM, comm,
                 &request);
  TMPI_CHECK(progress.wait(&request, 1, {sums}, deadline, step, Progress::Poll::kYield));
  values = *sums;
  return ok_status();
}

}  // namespace tmpi::check

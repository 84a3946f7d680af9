// The MPI backend (the CPU twin): MPI_Iallreduce over the group's communicator, and
// ping-pong between the first ranks of two hosts for a link. Every call is non-blocking
// and waited on through Progress, under the step's deadline.
//
// Two buffers serve every test, grown to the largest size asked and used by prefix, so that
// a 256 MiB vector is not allocated and zeroed again for each size. They are Held: a wait
// that fails leaves them to Progress with their pending requests, and the next test (if
// any) starts from new ones; a buffer is never resized or reused while a request is on it.
#include <algorithm>

#include "ncclcheck/data_check.h"
#include "ncclcheck/fabric.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/stalls.h"

namespace tmpi::check {

int Group::index_of(int world_rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), world_rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

namespace {

double now_seconds() {
  return MPI_Wtime();
}

// Runs `once` `times` times, each timed on its own, so that one that stopped is seen
// (stalls.h).
template <typename Once>
Expected<IterationTimes> time_each(int times, Once&& once) {
  std::vector<double> seconds;
  for (int i = 0; i < times; ++i) {
    double start = now_seconds();
    TMPI_CHECK(once());
    seconds.push_back(now_seconds() - start);
  }
  return summarize_iterations(seconds);
}

class MpiFabric : public Fabric {
 public:
  explicit MpiFabric(Progress& progress) : progress_(progress) { MPI_Comm_rank(MPI_COMM_WORLD, &rank_); }

  std::string library() const override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string line(text, static_cast<std::size_t>(length));
    line = line.substr(0, line.find_first_of(",\n"));
    std::replace(line.begin(), line.end(), '\t', ' ');  // MPICH: "MPICH Version:<tab>4.0.2"
    return line;
  }

  Expected<Measure> allreduce(const Group& group, std::uint64_t bytes, Iterations iterations,
                              const Deadline& deadline, std::string_view step) override {
    std::size_t count = bytes / sizeof(float);
    auto input = buffer(first_, count), output = buffer(second_, count);
    fill_pattern(input->data(), count, group.index_of(rank_));
    poison(output->data(), count);
    auto once = [&]() -> Status {
      MPI_Request request;
      MPI_Iallreduce(input->data(), output->data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, group.comm,
                     &request);
      return progress_.wait(&request, 1, {input, output}, deadline, step);
    };
    for (int i = 0; i < iterations.warmup; ++i) TMPI_CHECK(once());
    MPI_Request barrier;
    MPI_Ibarrier(group.comm, &barrier);
    TMPI_CHECK(progress_.wait(&barrier, 1, {}, deadline, step));
    // The mean of the iterations is the sample, as nccl-tests reports it.
    TMPI_ASSIGN(IterationTimes summary, time_each(iterations.timed, once));
    Measure measure;
    measure.seconds = summary.mean;
    measure.stall = summary.stall;
    measure.wrong = count_wrong_sum(output->data(), count, static_cast<int>(group.ranks.size()));
    return measure;
  }

  bool links_use_every_rank() const override { return false; }

  // Rank 0 of the group sends, rank 1 answers, each with its own pattern; the receiver of
  // each direction checks what arrived after the last iteration. The time is half the
  // median round trip.
  Expected<Measure> link(const Group& group, std::uint64_t bytes, Iterations iterations,
                         const Deadline& deadline, std::string_view step) override {
    std::size_t count = bytes / sizeof(float);
    int me = group.index_of(rank_);
    int peer = group.ranks.at(me == 0 ? 1 : 0);
    auto outgoing = buffer(first_, count), incoming = buffer(second_, count);
    fill_pattern(outgoing->data(), count, me);
    poison(incoming->data(), count);
    constexpr int kTag = 7;
    auto exchange = [&]() -> Status {
      MPI_Request request;
      for (int turn = 0; turn < 2; ++turn) {
        if ((turn == 0) == (me == 0)) {
          MPI_Isend(outgoing->data(), static_cast<int>(count), MPI_FLOAT, peer, kTag, MPI_COMM_WORLD,
                    &request);
        } else {
          MPI_Irecv(incoming->data(), static_cast<int>(count), MPI_FLOAT, peer, kTag, MPI_COMM_WORLD,
                    &request);
        }
        TMPI_CHECK(progress_.wait(&request, 1, {outgoing, incoming}, deadline, step));
      }
      return ok_status();
    };
    for (int i = 0; i < iterations.warmup; ++i) TMPI_CHECK(exchange());
    // Each round trip is timed on its own and the median kept: a link test must not blame a
    // link for one round trip that the scheduler delayed (hosts shared with other work). A
    // round trip that took seconds is another thing: the link stopped (stalls.h).
    TMPI_ASSIGN(IterationTimes summary, time_each(iterations.timed, exchange));
    Measure measure;
    measure.seconds = summary.median / 2.0;
    measure.stall = summary.stall;
    measure.wrong = count_wrong_copy(incoming->data(), count, me == 0 ? 1 : 0);
    return measure;
  }

  double link_gbps(std::uint64_t bytes, double seconds, int /*group_size*/) const override {
    return algbw_gbps(bytes, seconds);
  }
  int transfers_per_iteration() const override { return 2; }

 private:
  using Buffer = std::shared_ptr<std::vector<float>>;

  // The slot's buffer with room for `count` floats. A buffer that Progress also holds has a
  // request still pending on it (a failed wait): it is left alone, and the slot starts anew.
  static Buffer buffer(Buffer& slot, std::size_t count) {
    if (!slot || slot.use_count() > 1) slot = std::make_shared<std::vector<float>>();
    if (slot->size() < count) slot->resize(count);
    return slot;
  }

  Progress& progress_;
  int rank_ = 0;
  Buffer first_, second_;  // input and output, or outgoing and incoming
};

}  // namespace

std::unique_ptr<Fabric> make_mpi_fabric(Progress& progress) {
  return std::make_unique<MpiFabric>(progress);
}

}  // namespace tmpi::check

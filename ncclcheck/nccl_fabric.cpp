// The NCCL backend: one GPU per local rank, one NCCL communicator per group (made on first
// use, cached by the group's key). Nothing may hang on a broken link, so every
// communicator is non-blocking (ncclConfig_t.blocking = 0): its init, every collective and
// the stream are polled, with ncclCommGetAsyncError, until the step's deadline, and a
// deadline calls ncclCommAbort. The unique id travels over MPI point-to-point messages,
// through Progress, so that it is under the deadline too.
//
// No kernel of our own: buffers are filled and checked on the host and copied, so that the
// backend builds with the host compiler against cudart and NCCL.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>

#include <fmt/format.h>

#include "ncclcheck/data_check.h"
#include "ncclcheck/fabric.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/stalls.h"

namespace tmpi::check {

namespace {

constexpr int kUniqueIdTag = 11;

Status cuda_ok(cudaError_t result, std::string_view call) {
  if (result == cudaSuccess) return ok_status();
  return make_error(Exit::kUnavailable, "{}: {} ({})", call, cudaGetErrorString(result),
                    static_cast<int>(result));
}

Status nccl_ok(ncclResult_t result, std::string_view call, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess || result == ncclInProgress) return ok_status();
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : "";
  return make_error(Exit::kUnavailable, "{}: {} {}", call, ncclGetErrorString(result),
                    detail != nullptr ? detail : "");
}

class NcclFabric : public Fabric {
 public:
  NcclFabric(Progress& progress, int device) : progress_(progress), device_(device) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }

  // After a failed step the job is aborted next: the other communicators are aborted too
  // (ncclCommAbort returns at once), not finalized, which would wait for peers that are gone.
  ~NcclFabric() override {
    for (auto& [key, comm] : comms_) {
      if (failed_ || progress_.abandoned() > 0) {
        ncclCommAbort(comm);
      } else {
        close(comm);
      }
    }
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status start() {
    TMPI_CHECK(cuda_ok(cudaSetDevice(device_), "cudaSetDevice"));
    TMPI_CHECK(cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    cudaDeviceProp properties{};
    TMPI_CHECK(cuda_ok(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties"));
    char bus_id[32] = {0};
    TMPI_CHECK(cuda_ok(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device_), "cudaDeviceGetPCIBusId"));
    int count = 0;
    cudaGetDeviceCount(&count);
    device_info_ = {{"rank", rank_},
                    {"device", device_},
                    {"name", properties.name},
                    {"pci_bus_id", bus_id},
                    {"visible_devices", count}};
    return ok_status();
  }

  std::string library() const override {
    int version = 0;
    ncclGetVersion(&version);
    return fmt::format("NCCL {}.{}.{}", version / 10000, version / 100 % 100, version % 100);
  }

  nlohmann::json device() const override { return device_info_; }

  Expected<Measure> allreduce(const Group& group, std::uint64_t bytes, Iterations iterations,
                              const Deadline& deadline, std::string_view step) override {
    TMPI_ASSIGN(ncclComm_t comm, comm_for(group, deadline, step));
    std::size_t count = bytes / sizeof(float);
    TMPI_CHECK(ensure_buffers(bytes));
    std::vector<float> host(count);
    fill_pattern(host.data(), count, group.index_of(rank_));
    TMPI_CHECK(
        cuda_ok(cudaMemcpy(send_, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU"));
    TMPI_CHECK(cuda_ok(cudaMemset(recv_, 0xFF, bytes), "cudaMemset"));  // all ones: NaN, the poison
    auto launch = [&](int times) -> Status {
      for (int i = 0; i < times; ++i) {
        TMPI_CHECK(nccl_ok(ncclAllReduce(send_, recv_, count, ncclFloat, ncclSum, comm, stream_),
                           "ncclAllReduce", comm));
        TMPI_CHECK(settle(comm, deadline, step));
      }
      return finish(comm, deadline, step);
    };
    TMPI_CHECK(launch(iterations.warmup));
    // Each timed iteration drains the stream and is timed on its own, so that one that
    // stopped (a link that flaps: stalls.h) is seen; the sample is their mean.
    std::vector<double> times;
    for (int i = 0; i < iterations.timed; ++i) {
      double start = MPI_Wtime();
      TMPI_CHECK(launch(1));
      times.push_back(MPI_Wtime() - start);
    }
    IterationTimes summary = summarize_iterations(times);
    Measure measure;
    measure.seconds = summary.mean;
    measure.stall = summary.stall;
    TMPI_CHECK(
        cuda_ok(cudaMemcpy(host.data(), recv_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU"));
    measure.wrong = count_wrong_sum(host.data(), count, static_cast<int>(group.ranks.size()));
    return measure;
  }

  bool links_use_every_rank() const override { return true; }

  // A link's communicator serves one test: it is closed after it, so that a host with 8
  // GPUs does not hold the buffers of 28 pair communicators at once.
  Expected<Measure> link(const Group& group, std::uint64_t bytes, Iterations iterations,
                         const Deadline& deadline, std::string_view step) override {
    auto measured = allreduce(group, bytes, iterations, deadline, step);
    if (auto it = comms_.find(group.key); it != comms_.end()) {
      close(it->second);
      comms_.erase(it);
    }
    return measured;
  }

  double link_gbps(std::uint64_t bytes, double seconds, int group_size) const override {
    return allreduce_busbw(algbw_gbps(bytes, seconds), group_size);
  }

 private:
  // Finalize (flushes its work) under a short deadline, then destroy; abort if it hangs.
  static void close(ncclComm_t comm) {
    Deadline deadline(Millis(10000));
    ncclResult_t state = ncclCommFinalize(comm);
    while (state == ncclInProgress && !deadline.expired()) ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }

  // A non-blocking communicator's state until it is no longer in progress, or the deadline.
  Status settle(ncclComm_t comm, const Deadline& deadline, std::string_view step) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      if (state == ncclSuccess) return ok_status();
      if (state != ncclInProgress) return abort(comm, nccl_ok(state, step, comm).take_error());
      progress_.serve();
      if (deadline.expired()) return abort(comm, timeout(step, deadline));
    }
  }

  // The stream drained, while NCCL reports no asynchronous error, or the deadline.
  Status finish(ncclComm_t comm, const Deadline& deadline, std::string_view step) {
    for (;;) {
      cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess) return ok_status();
      if (state != cudaErrorNotReady) return abort(comm, cuda_ok(state, step).take_error());
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        return abort(comm, nccl_ok(async, step, comm).take_error());
      progress_.serve();
      if (deadline.expired()) return abort(comm, timeout(step, deadline));
    }
  }

  static Error timeout(std::string_view step, const Deadline& deadline) {
    return make_error(Exit::kTempFail, "{} did not finish within {} s", step,
                      std::chrono::duration<double>(deadline.budget()).count());
  }

  Error abort(ncclComm_t comm, Error error) {
    failed_ = true;
    ncclCommAbort(comm);  // frees the communicator's resources without waiting for peers
    for (auto it = comms_.begin(); it != comms_.end(); ++it) {
      if (it->second == comm) {
        comms_.erase(it);
        break;
      }
    }
    return error;
  }

  Expected<ncclComm_t> comm_for(const Group& group, const Deadline& deadline, std::string_view step) {
    if (auto it = comms_.find(group.key); it != comms_.end()) return it->second;
    auto held = std::make_shared<ncclUniqueId>();  // Progress keeps it if the exchange times out
    ncclUniqueId& id = *held;
    int me = group.index_of(rank_);
    std::vector<MPI_Request> requests;
    if (me == 0) {
      TMPI_CHECK(nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId"));
      for (std::size_t i = 1; i < group.ranks.size(); ++i) {
        requests.emplace_back();
        MPI_Isend(&id, sizeof id, MPI_BYTE, group.ranks[i], kUniqueIdTag, MPI_COMM_WORLD, &requests.back());
      }
    } else {
      requests.emplace_back();
      MPI_Irecv(&id, sizeof id, MPI_BYTE, group.ranks.front(), kUniqueIdTag, MPI_COMM_WORLD,
                &requests.back());
    }
    TMPI_CHECK(progress_.wait(requests.data(), static_cast<int>(requests.size()), {held}, deadline, step));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    TMPI_CHECK(nccl_ok(ncclCommInitRankConfig(&comm, static_cast<int>(group.ranks.size()), id, me, &config),
                       "ncclCommInitRankConfig"));
    comms_[group.key] = comm;
    TMPI_CHECK(settle(comm, deadline, fmt::format("{} (NCCL init)", step)));
    return comm;
  }

  Status ensure_buffers(std::uint64_t bytes) {
    if (bytes <= capacity_) return ok_status();
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
    send_ = recv_ = nullptr;
    capacity_ = 0;
    TMPI_CHECK(cuda_ok(cudaMalloc(&send_, bytes), fmt::format("cudaMalloc {} bytes", bytes)));
    TMPI_CHECK(cuda_ok(cudaMalloc(&recv_, bytes), fmt::format("cudaMalloc {} bytes", bytes)));
    capacity_ = bytes;
    return ok_status();
  }

  Progress& progress_;
  int device_ = 0, rank_ = 0;
  cudaStream_t stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::map<std::string, ncclComm_t> comms_;
  bool failed_ = false;  // a communicator was aborted: the job ends next
  nlohmann::json device_info_;
};

}  // namespace

Expected<std::unique_ptr<Fabric>> make_nccl_fabric(Progress& progress, int local_rank,
                                                   const std::string& host) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int count = 0;
  cudaError_t found = cudaGetDeviceCount(&count);
  if (found != cudaSuccess || count == 0) {
    return make_error(
        Exit::kUnavailable,
        "no CUDA device is visible to rank {} on {} (cudaGetDeviceCount: {}); --backend nccl needs one GPU "
        "per local rank: check the pod's nvidia.com/gpu limit and CUDA_VISIBLE_DEVICES, or use --backend mpi",
        rank, host, found != cudaSuccess ? cudaGetErrorString(found) : "0 devices");
  }
  if (local_rank >= count) {
    return make_error(
        Exit::kUnavailable,
        "rank {} is local rank {} on {}, which sees only {} GPU(s); run at most one rank per GPU "
        "(slots = the pod's nvidia.com/gpu limit)",
        rank, local_rank, host, count);
  }
  auto fabric = std::make_unique<NcclFabric>(progress, local_rank);
  TMPI_CHECK(fabric->start());
  return std::unique_ptr<Fabric>(std::move(fabric));
}

}  // namespace tmpi::check

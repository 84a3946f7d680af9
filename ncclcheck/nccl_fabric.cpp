// The NCCL backend: one GPU per local rank, one NCCL communicator per group (made on first
// use, cached by the group's key). Nothing may hang on a broken link, so every
// communicator is non-blocking (ncclConfig_t.blocking = 0): its init, every collective and
// the stream are polled, with ncclCommGetAsyncError, until the step's deadline, and a
// deadline calls ncclCommAbort. The unique id travels over MPI point-to-point messages,
// through Progress, so that it is under the deadline too.
//
// NCCL and the CUDA driver are the image's, loaded at run time (gpu_api.h): no NCCL is a
// 78 (the image lacks what the job asks for; a restart cannot help), no driver or no device
// a 69 (no GPU for this rank). The device is made current through its primary context,
// which NCCL's own CUDA runtime adopts as the current device. No kernel of our own: buffers
// are filled and checked on the host and copied, so that the backend builds with the host
// compiler alone.
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "ncclcheck/data_check.h"
#include "ncclcheck/fabric.h"
#include "ncclcheck/gpu_api.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/stalls.h"

namespace tmpi::check {

namespace {

constexpr int kUniqueIdTag = 11;

class NcclFabric : public Fabric {
 public:
  NcclFabric(Progress& progress, NcclApi nccl, CudaDriverApi cuda, int device)
      : progress_(progress), nccl_(std::move(nccl)), cuda_(std::move(cuda)), device_(device) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }

  // After a failed step the job is aborted next: the other communicators are aborted too
  // (ncclCommAbort returns at once), not finalized, which would wait for peers that are gone.
  ~NcclFabric() override {
    for (auto& [key, comm] : comms_) {
      if (failed_ || progress_.abandoned() > 0) {
        nccl_.comm_abort(comm);
      } else {
        close(comm);
      }
    }
    if (send_ != 0) cuda_.mem_free(send_);
    if (recv_ != 0) cuda_.mem_free(recv_);
    if (stream_ != nullptr) cuda_.stream_destroy(stream_);
    if (context_ != nullptr) cuda_.primary_ctx_release(handle_);
  }

  Status start() {
    TMPI_CHECK(cuda_ok(cuda_.device_get(&handle_, device_), "cuDeviceGet"));
    TMPI_CHECK(cuda_ok(cuda_.primary_ctx_retain(&context_, handle_), "cuDevicePrimaryCtxRetain"));
    TMPI_CHECK(cuda_ok(cuda_.ctx_set_current(context_), "cuCtxSetCurrent"));
    TMPI_CHECK(cuda_ok(cuda_.stream_create(&stream_, kCuStreamNonBlocking), "cuStreamCreate"));
    char name[256] = {0};
    TMPI_CHECK(cuda_ok(cuda_.device_get_name(name, sizeof name - 1, handle_), "cuDeviceGetName"));
    char bus_id[32] = {0};
    TMPI_CHECK(cuda_ok(cuda_.device_get_pci_bus_id(bus_id, sizeof bus_id, handle_), "cuDeviceGetPCIBusId"));
    int count = 0;
    cuda_.device_get_count(&count);
    device_info_ = {{"rank", rank_},
                    {"device", device_},
                    {"name", name},
                    {"pci_bus_id", bus_id},
                    {"visible_devices", count}};
    return ok_status();
  }

  std::string library() const override { return nccl_.name(); }

  nlohmann::json device() const override { return device_info_; }

  Expected<Measure> allreduce(const Group& group, std::uint64_t bytes, Iterations iterations,
                              const Deadline& deadline, std::string_view step) override {
    TMPI_ASSIGN(NcclComm comm, comm_for(group, deadline, step));
    std::size_t count = bytes / sizeof(float);
    TMPI_CHECK(ensure_buffers(bytes));
    std::vector<float> host(count);
    fill_pattern(host.data(), count, group.index_of(rank_));
    TMPI_CHECK(cuda_ok(cuda_.memcpy_htod(send_, host.data(), bytes), "cuMemcpyHtoD"));
    TMPI_CHECK(cuda_ok(cuda_.memset_d8(recv_, 0xFF, bytes), "cuMemsetD8"));  // all ones: NaN, the poison
    auto launch = [&](int times) -> Status {
      for (int i = 0; i < times; ++i) {
        TMPI_CHECK(nccl_ok(
            nccl_.all_reduce(pointer(send_), pointer(recv_), count, kNcclFloat, kNcclSum, comm, stream_),
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
    TMPI_CHECK(cuda_ok(cuda_.memcpy_dtoh(host.data(), recv_, bytes), "cuMemcpyDtoH"));
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
  static void* pointer(CuDevicePtr address) {
    return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr): a device address
  }

  Status cuda_ok(CuResult result, std::string_view call) const {
    if (result == kCuSuccess) return ok_status();
    return make_error(Exit::kUnavailable, "{}: {}", call, cuda_.describe(result));
  }

  Status nccl_ok(NcclResult result, std::string_view call, NcclComm comm = nullptr) const {
    if (result == kNcclSuccess || result == kNcclInProgress) return ok_status();
    const char* detail = comm != nullptr ? nccl_.get_last_error(comm) : "";
    return make_error(Exit::kUnavailable, "{}: {} {}", call, nccl_.get_error_string(result),
                      detail != nullptr ? detail : "");
  }

  // Finalize (flushes its work) under a short deadline, then destroy; abort if it hangs.
  void close(NcclComm comm) const {
    Deadline deadline(Millis(10000));
    NcclResult state = nccl_.comm_finalize(comm);
    while (state == kNcclInProgress && !deadline.expired()) nccl_.comm_get_async_error(comm, &state);
    if (state == kNcclSuccess) {
      nccl_.comm_destroy(comm);
    } else {
      nccl_.comm_abort(comm);
    }
  }

  // A non-blocking communicator's state until it is no longer in progress, or the deadline.
  Status settle(NcclComm comm, const Deadline& deadline, std::string_view step) {
    for (;;) {
      NcclResult state = kNcclSuccess;
      nccl_.comm_get_async_error(comm, &state);
      if (state == kNcclSuccess) return ok_status();
      if (state != kNcclInProgress) return abort(comm, nccl_ok(state, step, comm).take_error());
      progress_.serve();
      if (deadline.expired()) return abort(comm, timeout(step, deadline));
    }
  }

  // The stream drained, while NCCL reports no asynchronous error, or the deadline.
  Status finish(NcclComm comm, const Deadline& deadline, std::string_view step) {
    for (;;) {
      CuResult state = cuda_.stream_query(stream_);
      if (state == kCuSuccess) return ok_status();
      if (state != kCuNotReady) return abort(comm, cuda_ok(state, step).take_error());
      NcclResult async = kNcclSuccess;
      nccl_.comm_get_async_error(comm, &async);
      if (async != kNcclSuccess && async != kNcclInProgress)
        return abort(comm, nccl_ok(async, step, comm).take_error());
      progress_.serve();
      if (deadline.expired()) return abort(comm, timeout(step, deadline));
    }
  }

  static Error timeout(std::string_view step, const Deadline& deadline) {
    return make_error(Exit::kTempFail, "{} did not finish within {} s", step,
                      std::chrono::duration<double>(deadline.budget()).count());
  }

  Error abort(NcclComm comm, Error error) {
    failed_ = true;
    nccl_.comm_abort(comm);  // frees the communicator's resources without waiting for peers
    for (auto it = comms_.begin(); it != comms_.end(); ++it) {
      if (it->second == comm) {
        comms_.erase(it);
        break;
      }
    }
    return error;
  }

  Expected<NcclComm> comm_for(const Group& group, const Deadline& deadline, std::string_view step) {
    if (auto it = comms_.find(group.key); it != comms_.end()) return it->second;
    auto held = std::make_shared<NcclUniqueId>();  // Progress keeps it if the exchange times out
    NcclUniqueId& id = *held;
    int me = group.index_of(rank_);
    std::vector<MPI_Request> requests;
    if (me == 0) {
      TMPI_CHECK(nccl_ok(nccl_.get_unique_id(&id), "ncclGetUniqueId"));
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
    NcclConfig config;
    config.blocking = 0;
    NcclComm comm = nullptr;
    TMPI_CHECK(
        nccl_ok(nccl_.comm_init_rank_config(&comm, static_cast<int>(group.ranks.size()), id, me, &config),
                "ncclCommInitRankConfig"));
    comms_[group.key] = comm;
    TMPI_CHECK(settle(comm, deadline, fmt::format("{} (NCCL init)", step)));
    return comm;
  }

  Status ensure_buffers(std::uint64_t bytes) {
    if (bytes <= capacity_) return ok_status();
    if (send_ != 0) cuda_.mem_free(send_);
    if (recv_ != 0) cuda_.mem_free(recv_);
    send_ = recv_ = 0;
    capacity_ = 0;
    TMPI_CHECK(cuda_ok(cuda_.mem_alloc(&send_, bytes), fmt::format("cuMemAlloc {} bytes", bytes)));
    TMPI_CHECK(cuda_ok(cuda_.mem_alloc(&recv_, bytes), fmt::format("cuMemAlloc {} bytes", bytes)));
    capacity_ = bytes;
    return ok_status();
  }

  Progress& progress_;
  NcclApi nccl_;
  CudaDriverApi cuda_;
  int device_ = 0, rank_ = 0;
  CuDevice handle_ = 0;
  CuContext context_ = nullptr;  // the device's primary context, retained while this lives
  CuStream stream_ = nullptr;
  CuDevicePtr send_ = 0, recv_ = 0;
  std::uint64_t capacity_ = 0;
  std::map<std::string, NcclComm> comms_;
  bool failed_ = false;  // a communicator was aborted: the job ends next
  nlohmann::json device_info_;
};

// A variable of the image's environment, "" where unset.
std::string_view environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

Expected<std::unique_ptr<Fabric>> make_nccl_fabric(Progress& progress, int local_rank,
                                                   const std::string& host, const std::string& nccl_library) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string_view ld_library_path = environment("LD_LIBRARY_PATH");
  // The same line from every rank of one image, so that the report holds it once.
  auto nccl = load_nccl(nccl_search(nccl_library, ld_library_path, environment("CUDA_HOME")));
  if (!nccl) return Error{nccl.error().exit, no_nccl_line(nccl.error().message)};
  std::string fix = fmt::format(
      "--backend nccl needs one GPU per local rank: check the pod's nvidia.com/gpu limit and "
      "CUDA_VISIBLE_DEVICES, or use --check mpi ({} is here)",
      nccl->name());
  auto cuda = load_cuda_driver(cuda_driver_search(ld_library_path));
  if (!cuda) {
    return make_error(Exit::kUnavailable, "no GPU driver for rank {} on {}: {}; {}", rank, host,
                      cuda.error().message, fix);
  }
  int count = 0;
  CuResult found = cuda->init(0);
  if (found == kCuSuccess) found = cuda->device_get_count(&count);
  if (found != kCuSuccess || count == 0) {
    return make_error(Exit::kUnavailable,
                      "no CUDA device is visible to rank {} on {} (the driver {}: {}); {}", rank, host,
                      cuda->library.path, found != kCuSuccess ? cuda->describe(found) : "0 devices", fix);
  }
  if (local_rank >= count) {
    return make_error(
        Exit::kUnavailable,
        "rank {} is local rank {} on {}, which sees only {} GPU(s); run at most one rank per GPU "
        "(slots = the pod's nvidia.com/gpu limit)",
        rank, local_rank, host, count);
  }
  auto fabric =
      std::make_unique<NcclFabric>(progress, std::move(nccl).value(), std::move(cuda).value(), local_rank);
  TMPI_CHECK(fabric->start());
  return std::unique_ptr<Fabric>(std::move(fabric));
}

}  // namespace tmpi::check

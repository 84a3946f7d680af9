// A backend of nccl-check: what differs between NCCL on GPUs and MPI on CPUs. The driver
// (driver.cpp) owns the plan (which sizes, which groups, which rounds) and the MPI
// communicators; a backend only measures, and checks the data it moved.
//
// A group is the set of world ranks of one test: the world, one host's ranks, or the ranks
// of two hosts. MPI has no non-blocking communicator split, so the driver makes the MPI
// communicators it needs (world, per host) once at the start; pair tests need none (the MPI
// backend uses point-to-point messages on the world, the NCCL backend makes its own
// communicators, under the deadline).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/error.h"
#include "ncclcheck/budget.h"
#include "ncclcheck/progress.h"

namespace tmpi::check {

struct Group {
  std::string key;                // "world", "host 2", "link 0-3": backends cache by it
  std::vector<int> ranks;         // world ranks, ascending; the calling rank is one of them
  MPI_Comm comm = MPI_COMM_NULL;  // over exactly `ranks`, where the driver made one
  int index_of(int world_rank) const;
};

struct Measure {
  double seconds = 0;      // one iteration (one-way transfer for ping-pong), this rank's view
  std::int64_t wrong = 0;  // elements this rank found wrong
  double stall = 0;        // seconds the slowest timed iteration ran past the median (stalls.h)
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual std::string library() const = 0;              // versions, for the report
  virtual nlohmann::json device() const { return {}; }  // this rank's GPU, if any

  // Out-of-place float-sum all-reduce of `bytes` over every rank of `group`: output
  // poisoned before, every element checked after.
  virtual Expected<Measure> allreduce(const Group& group, std::uint64_t bytes, Iterations iterations,
                                      const Deadline& deadline, std::string_view step) = 0;

  // The test of the link between two hosts. `group` holds both hosts' ranks, or only their
  // first ranks when links_use_every_rank() is false.
  virtual bool links_use_every_rank() const = 0;
  virtual Expected<Measure> link(const Group& group, std::uint64_t bytes, Iterations iterations,
                                 const Deadline& deadline, std::string_view step) = 0;
  // GB/s of a link test (ping-pong: bytes per one-way time; all-reduce: busbw).
  virtual double link_gbps(std::uint64_t bytes, double seconds, int group_size) const = 0;
  // Transfers of `bytes` in one iteration of a link test, each taking Measure::seconds:
  // ping-pong times the one-way trip of its two.
  virtual int transfers_per_iteration() const { return 1; }
};

// MPI_Iallreduce and ping-pong on CPU buffers: the CPU twin, for machines without GPUs.
std::unique_ptr<Fabric> make_mpi_fabric(Progress& progress);

// NCCL on one GPU per local rank, with the image's NCCL (`nccl_library`, or the search of
// gpu_libraries.h where ""). Exit::kConfig when the image has no NCCL; Exit::kUnavailable
// when this rank sees no GPU for itself.
Expected<std::unique_ptr<Fabric>> make_nccl_fabric(Progress& progress, int local_rank,
                                                   const std::string& host, const std::string& nccl_library);

}  // namespace tmpi::check

// nccl-check's result, in the two forms its readers need: a table on stdout in the spirit
// of nccl-tests (size, time, algbw, busbw, #wrong), and a JSON document that the launcher
// reads (--json) and folds into report.json and the TrainJob status. Rank 0 fills it from
// what every rank measured; a rank that hits a deadline fills the timeout part itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/choice.h"
#include "common/error.h"
#include "ncclcheck/metrics.h"

namespace tmpi::check {

struct SizeResult {
  std::uint64_t bytes = 0;
  double seconds = 0;  // one iteration, averaged over ranks (as nccl-tests does)
  double algbw = 0, busbw = 0;
  std::int64_t wrong = 0;  // elements that differ from the expected sum, over all ranks
  int iterations = 0;      // timed iterations that fitted the sweep's budget (budget.h)
  double stall = 0;        // seconds the slowest iteration ran past the median (stalls.h)
};

// A size of the sweep that its budget left out: one iteration would take `predicted` s
// (from the size before it), more than the `left` s of the budget.
struct SkippedSize {
  std::uint64_t bytes = 0;
  double predicted = 0, left = 0;
  bool slow = false;  // past a quarter of the step timeout (skipped_size_is_slow)
};

struct HostInfo {
  std::string name;
  std::vector<int> ranks;
  nlohmann::json devices = nlohmann::json::array();  // one object per GPU (NCCL backend)
  int cpus = 0;              // distinct CPUs its machine's ranks may run on; 0: unknown
  int machine_ranks = 0;     // the ranks on its machine: its own, and those of hosts beside it
  int machine_hosts = 1;     // the hosts (pods) on its machine, itself included
  bool shares_cpus = false;  // MPI backend, more ranks than CPUs: its own links shown, not judged (cpus.h)
};

// A link between two GPUs (local ranks) of one host.
struct GpuLink {
  int host = 0;
  LinkSample link;  // link.hosts holds the two local ranks
};

struct Timeout {
  std::string step;  // "all-reduce 64 MiB", "pairs round 2", "init"
  double after_seconds = 0;
  int rank = 0;  // the rank that saw it
  std::string host;
  std::vector<std::string> silent_hosts;  // hosts with a rank that answered no liveness ping
  std::vector<int> silent_ranks;          // those ranks; "rank N" above when init never learnt N's host
  bool blocking = false;  // in a call that waits for every rank (watchdog.h): a peer is missing
};

// --backend: NCCL on GPUs, or MPI on CPUs (the CPU twin). Read once from the flag
// (options_from); the report and the timeout lines spell it as the flag does.
enum class Backend { kMpi, kNccl };
inline constexpr Spellings<Backend, 2> kBackendSpellings{{{"mpi", Backend::kMpi}, {"nccl", Backend::kNccl}}};
inline std::string_view backend_name(Backend backend) {
  return choice_name(backend, kBackendSpellings);
}

struct Report {
  Backend backend = Backend::kMpi;
  std::string library;  // the MPI library's version line, and NCCL's version
  int ranks = 0;
  std::vector<HostInfo> hosts;
  std::vector<SizeResult> allreduce;
  std::vector<SkippedSize> skipped;
  std::uint64_t pair_bytes = 0;
  std::vector<NodeSample> nodes;    // intra-node all-reduce, busbw
  std::vector<LinkSample> links;    // first pass, one per pair of hosts
  std::vector<LinkSample> retests;  // second pass
  double link_floor = 0;
  std::vector<GpuLink> gpu_links;  // within each host, every pair of its ranks
  double gpu_floor = 0;
  std::vector<Culprit> culprits;
  std::optional<Timeout> timeout;
  std::string failure;                     // a check that could not run (no GPU), else empty
  Exit failure_exit = Exit::kUnavailable;  // its code: 64 where the ranks' options differed
  double seconds = 0;

  // "host GPU 3 (0000:19:00.0)", or "host rank 3" where no device is known.
  std::string gpu_name(int host, int local_rank) const;

  // 0 pass; 75 a deadline passed with a rank silent or missing; 64 options that differ
  // between ranks; 69 a culprit, another failure, or a deadline passed with every rank
  // answering (not localised) (docs/design.md, exit codes).
  int exit_code() const;
  std::string result() const;  // "pass", "timeout", "fail"
};

// The names of the hosts of `ranks` (host_of: world rank -> index in report.hosts), sorted,
// each once; "rank N" for a rank whose host init never learnt.
std::vector<std::string> hosts_of_ranks(const Report& report, const std::vector<int>& host_of,
                                        const std::vector<int>& ranks);

nlohmann::json to_json(const Report& report);
std::string render_table(const Report& report);

// "1 MiB", "256 MiB", "1 GiB", "4 KiB", "100 B".
std::string human_bytes(std::uint64_t bytes);

}  // namespace tmpi::check

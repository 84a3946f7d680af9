// The TrainJob status payload (Trainer's status server, KEP-2779): what the launcher knows
// of the job's health, turned into `{"trainerStatus": {...}}` within the API's limits.
// Pure functions, no I/O: reporter.h sends what these build.
//
// The server's rules, which its CRD enforces and tests/fakes/fake_trainer_status.py copies:
// lastUpdatedTime is required; progressPercentage 0..100 and estimatedRemainingSeconds >= 0
// (int32); at most 256 metrics, each name and value a string of 1 to 64 characters; the
// body at most 64 KiB. Errors come back as a metav1.Status.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tmpi::status {

// The launcher's view of the job, at one moment.
struct JobHealth {
  std::string phase;  // WaitingForHosts, Preflight, Running, Succeeded, Failed
  int hosts_ready = 0, hosts_total = 0;
  int ranks_total = 0, ranks_running = 0, ranks_failed = 0;
  std::string first_failure;         // "rank 1 on train-node-0-0 exited with code 3 after 2 s"
  std::optional<int> exit_code;      // set once the job has ended
  std::optional<double> busbw_gbps;  // the fabric check's best all-reduce bus bandwidth
  std::string slowest_host;          // the fabric check's culprit, when it named one
  bool operator==(const JobHealth&) const = default;
};

constexpr std::size_t kMaxMetrics = 256;
constexpr std::size_t kMaxMetricText = 64;
constexpr std::size_t kMaxBody = 64 * 1024;

// {"trainerStatus": {...}}: the metrics below, progressPercentage 100 when the job
// succeeded (the launcher knows no progress before that), lastUpdatedTime = now (RFC 3339,
// UTC, seconds). Texts longer than 64 characters are cut, with "..." at their end.
nlohmann::json status_body(const JobHealth& health, std::chrono::system_clock::time_point now);

// The server's answer in one line for a log: the metav1.Status message and reason when
// the body is one, else the start of the body.
std::string describe_answer(long http_status, const std::string& body);

}  // namespace tmpi::status

// See trainer_status.h. Metric names carry an `mpi_` or `nccl_` prefix so that they do not
// collide with the training's own metrics (loss, accuracy) on a dashboard.
#include "status/trainer_status.h"

#include <ctime>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/json_fields.h"
#include "common/utf8.h"

namespace tmpi::status {

namespace {

std::string clip(const std::string& text) {
  return truncate_utf8(text, kMaxMetricText, "...");  // never in the middle of a character
}

void add(nlohmann::json& metrics, const char* name, const std::string& value) {
  if (value.empty() || metrics.size() >= kMaxMetrics) return;  // the API refuses empty values
  metrics.push_back({{"name", clip(name)}, {"value", clip(value)}});
}

}  // namespace

nlohmann::json status_body(const JobHealth& health, std::chrono::system_clock::time_point now) {
  nlohmann::json metrics = nlohmann::json::array();
  add(metrics, "mpi_phase", health.phase);
  if (health.hosts_total > 0)
    add(metrics, "mpi_hosts_ready", fmt::format("{}/{}", health.hosts_ready, health.hosts_total));
  if (health.ranks_total > 0) {
    add(metrics, "mpi_ranks", std::to_string(health.ranks_total));
    add(metrics, "mpi_ranks_running", std::to_string(health.ranks_running));
    add(metrics, "mpi_ranks_failed", std::to_string(health.ranks_failed));
  }
  add(metrics, "mpi_first_failure", health.first_failure);
  if (health.exit_code) add(metrics, "mpi_exit_code", std::to_string(*health.exit_code));
  if (health.busbw_gbps) add(metrics, "nccl_busbw_gbps", fmt::format("{:.3f}", *health.busbw_gbps));
  add(metrics, "nccl_slowest_host", health.slowest_host);
  nlohmann::json status = {{"metrics", metrics}, {"lastUpdatedTime", rfc3339(now)}};
  if (health.phase == "Succeeded") {
    status["progressPercentage"] = 100;
    status["estimatedRemainingSeconds"] = 0;
  }
  return {{"trainerStatus", status}};
}

namespace {

// At most 200 bytes of text from the server, on one line.
std::string one_line(const std::string& text) {
  std::string start = truncate_utf8(text, 200);
  for (char& c : start) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return start;
}

}  // namespace

std::string describe_answer(long http_status, const std::string& body) {
  // Read without exceptions (json_fields.h): this runs on the reporter's thread, and a field
  // of another type ({"kind": "Status", "message": null}) must not end the launcher.
  auto parsed = parse_object(body);
  if (string_at(parsed, "/kind") == "Status") {
    return fmt::format("HTTP {} {}: {}", http_status, one_line(string_at(parsed, "/reason")),
                       one_line(string_at(parsed, "/message")));
  }
  return fmt::format("HTTP {}: {}", http_status, one_line(body));
}

}  // namespace tmpi::status

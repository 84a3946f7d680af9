// See status_feed.h.
#include "launcher/status_feed.h"

#include <spdlog/spdlog.h>

#include "common/json_fields.h"

namespace tmpi::launch {

namespace {

constexpr Millis kFinalWait{10000};

}  // namespace

StatusFeed::StatusFeed(const StatusOptions& options, int hosts_total, int ranks_total) {
  health_.hosts_total = hosts_total;
  health_.ranks_total = ranks_total;
  auto config = status::config_from_environment();
  if (options.mode == StatusMode::kOff || !config) {
    spdlog::debug("status: not reported ({})", options.mode == StatusMode::kOff
                                                   ? "--status off"
                                                   : "KUBEFLOW_TRAINER_SERVER_URL is not set");
    return;
  }
  failures_only_ = options.mode == StatusMode::kFailures;
  config->interval = options.interval;
  spdlog::info("status: reporting {} to {}", failures_only_ ? "failures" : "the job's phases", config->url);
  reporter_ = std::make_unique<status::StatusReporter>(std::move(*config));
}

void StatusFeed::phase(const std::string& name, int hosts_ready) {
  health_.phase = name;
  health_.hosts_ready = hosts_ready;
  push();
}

void StatusFeed::ranks(int running, int failed, const std::string& first_failure) {
  health_.ranks_running = running;
  health_.ranks_failed = failed;
  health_.first_failure = first_failure;
  push();
}

// The report is nccl-check's, read from mpirun's output: its fields are read without
// exceptions (json_fields.h), so a malformed one ("allreduce": [1]) reads as absent.
void StatusFeed::fabric(const nlohmann::json& report) {
  if (!report.is_object()) return;
  double best = 0;
  if (const auto* sizes = node_at(report, "/allreduce"); sizes != nullptr && sizes->is_array()) {
    for (const auto& size : *sizes) best = std::max(best, number_at(size, "/busbw_gbps", 0.0));
  }
  if (best > 0) health_.busbw_gbps = best;
  if (const auto* culprits = node_at(report, "/culprits"); culprits != nullptr && culprits->is_array()) {
    for (const auto& culprit : *culprits) {
      if (string_at(culprit, "/kind") == "host") {
        health_.slowest_host = string_at(culprit, "/name");  // bounded in the status body
        break;
      }
    }
  }
  push();
}

void StatusFeed::finish(int exit_code, const std::string& reason) {
  if (finished_) return;
  finished_ = true;
  health_.phase = exit_code == 0 ? "Succeeded" : "Failed";
  health_.exit_code = exit_code;
  health_.ranks_running = 0;
  if (exit_code != 0 && health_.first_failure.empty()) health_.first_failure = reason;
  if (!reporter_ || (failures_only_ && exit_code == 0)) return;
  reporter_->post_final(health_, kFinalWait);
  final_posted_ = true;
}

void StatusFeed::wait() {
  if (!final_posted_ || reporter_->wait_final()) return;
  spdlog::warn("status: the final TrainJob status was not accepted within {} s", kFinalWait.count() / 1000);
}

void StatusFeed::push() {
  if (reporter_ && !failures_only_ && !finished_) reporter_->update(health_);
}

}  // namespace tmpi::launch

// The launcher's side of the TrainJob status: it keeps a JobHealth (status/) up to date as
// the job moves through its phases and hands it to the reporter, which posts it when
// Trainer's status server is configured (KUBEFLOW_TRAINER_SERVER_URL) and --status allows.
//
// Why --status failures exists: the server replaces the whole trainerStatus on every post
// (its metrics list is atomic), so a training that reports its own progress and loss (the
// transformers Kubeflow callback does) would see them overwritten by the launcher's
// updates. With `failures`, the launcher posts only when the job fails.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "launcher/choices.h"
#include "status/reporter.h"

namespace tmpi::launch {

// --status and --status-interval.
struct StatusOptions {
  StatusMode mode = StatusMode::kAuto;
  Millis interval{0};
};

class StatusFeed {
 public:
  StatusFeed(const StatusOptions& options, int hosts_total, int ranks_total);

  void phase(const std::string& name, int hosts_ready);  // WaitingForHosts, Preflight, Running
  void ranks(int running, int failed, const std::string& first_failure);
  void fabric(const nlohmann::json& report);  // nccl-check's report: bandwidth, slowest host
  // Succeeded or Failed, posted at once without waiting (the launcher meanwhile tells the
  // sidecars that the job has ended); wait() then gives the server at most 10 s in all.
  void finish(int exit_code, const std::string& reason);
  void wait();

  const status::JobHealth& health() const { return health_; }  // what the next update carries

 private:
  void push();

  bool failures_only_ = false;
  bool finished_ = false;
  bool final_posted_ = false;
  status::JobHealth health_;
  std::unique_ptr<status::StatusReporter> reporter_;
};

}  // namespace tmpi::launch

// Every setting of `mpi-launcher run`, `check`, `shell` and `hosts`, typed and grouped by the
// piece that uses it. launcher_options() reads them from the parameters once, at the edge;
// below it, no code sees Params, and no piece sees this whole struct but run_job and
// check_job: prepare_job, the coordinator, the status feed, the Events, the wait, the
// preflight and the fabric check each take their own part, so a unit test builds exactly the
// options it needs, and a piece cannot read a setting that its caller did not mean to give it.
#pragma once

#include <string>
#include <vector>

#include "common/params.h"
#include "launcher/fabric_check.h"
#include "launcher/job.h"
#include "launcher/job_events.h"
#include "launcher/job_rendezvous.h"
#include "launcher/restarts.h"
#include "launcher/run_steps.h"
#include "launcher/status_feed.h"
#include "rendezvous/coordinator_service.h"

namespace tmpi::launch {

struct LauncherOptions {
  JobOptions job;
  RendezvousOptions rendezvous;
  StatusOptions status;
  EventsOptions events;
  FabricOptions fabric;
  RestartOptions restart;  // retryable_exits: filled at the edge, which can refuse them
  WaitFor wait = WaitFor::kSidecar;
  std::string coordinator;      // `hosts`: where to ask; "" = this pod's
  std::string report;           // report.json
  std::string termination_log;  // the verdict for kubectl describe pod (launcher/verdict.h)
  bool preflight = true;
  bool dry_run = false;
  Millis grace{0};
  Millis timeout{0};  // 0 = none
};

LauncherOptions launcher_options(const Params& params);

// The wait's and the preflight's parts (run_steps.h), read from the options above.
WaitOptions wait_options(const LauncherOptions& options);
PreflightOptions preflight_options(const LauncherOptions& options);

}  // namespace tmpi::launch

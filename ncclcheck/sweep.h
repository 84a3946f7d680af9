// The sweep over every host, the first step of nccl-check's plan (driver.h): a reach probe
// (one small all-reduce under a short deadline, so that a fabric that moves nothing ends
// the check early), then the ladder of sizes within the sweep's time budget (budget.h).
// A size that would not fit is recorded as skipped, not waited for: the per-host and
// per-pair steps that follow find out why (docs/design.md, nccl-check).
#pragma once

#include <functional>
#include <string>

#include "ncclcheck/driver.h"

namespace tmpi::check {

// Starts a step: names it (for a timeout's report) and returns its deadline.
using StepStarter = std::function<Deadline(std::string step, Millis deadline)>;

Status sweep_world(Fabric& fabric, Progress& progress, const Options& options, const StepStarter& begin,
                   Report& report);

}  // namespace tmpi::check

// The last preflight step (--check mpi|nccl|auto): nccl-check run as an MPI job over the
// same hosts and ranks as the job itself, not wrapped by the rank agent. Its table goes to
// the launcher's stdout; its JSON report (the line "nccl-check report: {...}") goes into
// report.json, and its culprits become rows of the preflight table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/job.h"
#include "launcher/preflight.h"

namespace tmpi::launch {

// --check auto is nccl when every host has GPUs, else mpi; the others stay as they are.
FabricBackend fabric_backend(FabricBackend check, const Topology& topology);

// --check, --nccl-check, and nccl-check's own settings that the user gave the launcher.
struct FabricOptions {
  FabricBackend check = FabricBackend::kNone;
  std::string program;  // "" = nccl-check beside mpi-launcher, else on PATH
  // "--name value" pairs of what the user set (a flag or a TMPI_ variable); the rest keeps
  // nccl-check's own defaults, some of which depend on the backend (--max-bytes).
  std::vector<std::string> passed_on;
  Millis step_timeout{0};
};

// The nccl-check command line, with the launcher's thresholds and sizes passed as flags.
std::vector<std::string> fabric_check_command(const FabricOptions& options, FabricBackend backend);

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json may allocate in its destructor
struct FabricCheck {
  nlohmann::json report;       // null when nccl-check printed none
  std::vector<CheckRow> rows;  // empty: passed
  Exit exit = Exit::kOk;       // kTempFail when a step's deadline passed, else kUnavailable
  std::string table;           // what nccl-check printed, its report line left out
};

// Reads nccl-check's output and exit status (pure; unit-tested). `placement` (rank -> host,
// as the placement check has just confirmed) names the host of a silent rank when the
// check timed out before its ranks had exchanged their host names.
FabricCheck read_fabric_check(const std::string& output, int status, const std::string& launcher_host,
                              const std::vector<std::string>& placement = {});

// Runs it (under a backstop of 20 steps' deadlines) and reads the result.
Expected<FabricCheck> run_fabric_check(const FabricOptions& options, const Job& job, FabricBackend backend,
                                       const std::function<bool()>& stopped = {});

}  // namespace tmpi::launch

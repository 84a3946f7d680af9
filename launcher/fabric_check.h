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
#include "launcher/mpi_command.h"
#include "launcher/preflight.h"

namespace tmpi::launch {

// --check auto: nccl where the job's pods have GPUs, else mpi; the others stay as they are.
// Where the topology knows the pods' GPU limits (mpi-init's pod list), nccl needs every
// host to have some. Where it knows none (every count 0: Trainer's hostfile says nothing of
// GPUs), the launcher's own container decides (`launcher_gpus`, visible_gpus): on the
// runtimes it runs ranks too, and every pod that runs ranks has the same resourcesPerNode.
FabricBackend fabric_backend(FabricBackend check, const Topology& topology, int launcher_gpus);

// The NVIDIA GPUs this container was given: its device nodes nvidia0, nvidia1, ... in
// `devices_dir` (/dev; a test plants its own), which the container toolkit creates for the
// GPUs of the pod's limit alone. NVIDIA_VISIBLE_DEVICES is no evidence of GPUs on its own
// (NVIDIA's images set it to "all" in their ENV, on CPU nodes too), but "void" or "none"
// says no GPU is meant, even where the nodes are there (a privileged pod sees every one).
int visible_gpus(const std::string& devices_dir, std::string_view nvidia_visible_devices);

// The nccl-check built for the job's MPI: an MPI program runs only under the MPI ABI it was
// compiled for: Open MPI's libmpi.so.40 (nccl-check), or MPICH's libmpi.so.12, which Intel
// MPI shares (nccl-check.mpich).
std::string nccl_check_name(Flavour flavour);

// --check, --nccl-check, and nccl-check's own settings that the user gave the launcher.
struct FabricOptions {
  FabricBackend check = FabricBackend::kNone;
  std::string program;  // "" = the flavour's nccl-check beside mpi-launcher, else on PATH
  // "--name value" pairs of what the user set (a flag or a TMPI_ variable); the rest keeps
  // nccl-check's own defaults, some of which depend on the backend (--max-bytes).
  std::vector<std::string> passed_on;
  Millis step_timeout{0};
};

// The nccl-check command line, with the launcher's thresholds and sizes passed as flags:
// --nccl-check, else nccl_check_name(flavour) beside mpi-launcher, else on PATH.
std::vector<std::string> fabric_check_command(const FabricOptions& options, FabricBackend backend,
                                              Flavour flavour = Flavour::kOpenMpi4);

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json may allocate in its destructor
struct FabricCheck {
  nlohmann::json report;       // null when nccl-check printed none
  std::vector<CheckRow> rows;  // empty: passed
  Exit exit = Exit::kOk;       // kTempFail: a step's deadline passed; kConfig: no NCCL; else kUnavailable
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

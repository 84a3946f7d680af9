// What `mpi-launcher run`, `check`, `shell` and `hosts` share: the job as the launcher sees
// it (topology, key, MPI flavour and the exact command), built from the parameters once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/params.h"
#include "common/topology.h"
#include "launcher/mpi_command.h"

namespace tmpi::launch {

struct Job {
  Topology topology;
  std::string ssh_dir, key_path, private_key;
  std::string launcher_name;               // this pod's host name (the coordinator's address)
  LaunchPlan plan;                         // with the agent-wrapped user command
  std::map<std::string, std::string> env;  // set for mpirun and forwarded to ranks
  std::shared_ptr<ScratchDir> scratch;     // hydra's ssh wrapper lives here; removed with the job
};

// This mpi-launcher's own path, and the path of a program installed beside it ("" when
// there is none): images put mpi-rank and nccl-check in the same folder.
std::string self_exe();
std::string beside_self(const std::string& name);

// Reads hosts.json and the key, detects the MPI, and builds the plan for `command`.
Expected<Job> prepare_job(const Params& params, const std::vector<std::string>& command);

// The same plan for another command (the placement probe runs `hostname`), unwrapped.
LaunchPlan plan_for(const Job& job, std::vector<std::string> command, std::vector<std::string> extra_args);

}  // namespace tmpi::launch

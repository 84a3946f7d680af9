// The rank agent's parameters read into its options: the edge of `mpi-rank` and of
// `mpi-launcher rank` (both main.cpp files call it), kept in a header because mpi-rank
// links only the lean library, not the launcher's. See agent/agent.h.
#pragma once

#include "agent/agent.h"
#include "common/params.h"

namespace tmpi::launch {

inline RankCommandOptions rank_options(const Params& params) {
  RankCommandOptions options;
  options.agent.coordinator = params.str(param::kCoordinator);
  options.agent.master_addr = params.str(param::kMasterAddr);
  options.agent.master_port = params.text(param::kMasterPort);
  options.agent.beat_interval = params.duration(param::kBeatInterval);
  options.agent.lost_after = params.duration(param::kLostAfter);
  options.agent.start_gate = params.flag(param::kStartGate);
  options.agent.epoch = params.str(param::kEpoch);
  options.agent.gate_fail_open = params.flag(param::kGateFailOpen);
  options.ssh_dir = params.str(param::kSshDir);
  options.ssh_dir_given = params.is_set(param::kSshDir);
  return options;
}

}  // namespace tmpi::launch

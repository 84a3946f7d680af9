// The contract between mpi-launcher and the programs it starts: every environment variable
// that the launcher hands the rank agents (through mpirun, which forwards them to every
// rank), mpi-ssh, and the shell of `mpi-launcher shell`, named once, here.
//
// Two kinds:
// - Parameters (common/param_names.h): settings that a person may also give an agent by
//   hand, so that the agent reads them through Params like any flag. The launcher sets them
//   from its own options; their variable is env_name(handle.name), never a literal.
// - Data: what the launcher computes for the agents and no person sets (the slots' layout,
//   the hosts of the ranks, the relay's socket). These are spelled here and nowhere else.
//
// The launcher writes them in launcher/job.cpp and launcher/run.cpp, mpirun forwards the
// agents' ones (launcher/mpi_command.cpp, forwarded_env), and the agent reads them in
// agent/options.h, agent/agent.cpp and agent/placement.cpp.
#pragma once

#include <array>
#include <string_view>

#include "common/param_names.h"

namespace tmpi::contract {

// The parameters that the launcher sets for every agent, from its own options.
inline constexpr std::array kAgentParameters = {
    param::kCoordinator.name,  // where the agent reports: the launcher's address and port
    param::kMasterAddr.name,   // MASTER_ADDR and MASTER_PORT for torch
    param::kMasterPort.name,   param::kLogLevel.name,
    param::kSshDir.name,        // where the job key is, when the launcher was told
    param::kBeatInterval.name,  // as often as the coordinator expects a beat
    param::kLostAfter.name,     // as late as the coordinator gives up on the agent
    param::kStartGate.name,     // whether the agent asks before its rank starts (agent/gate.h)
    param::kGateFailOpen.name,  // whether a gate that gives no verified answer lets the rank start
    param::kEpoch.name,         // this launch's session: without it every request is refused (409)
};

// The slots per host in hostfile order, run-length coded ("8x96,4x32": agent/agent.h).
inline constexpr std::string_view kSlotLayout = "TMPI_SLOT_LAYOUT";
// The hosts in hostfile order, for each agent's placement check (agent/placement.h).
inline constexpr std::string_view kRankHosts = "TMPI_RANK_HOSTS";
// The attempt of an in-place restart (launcher/restarts.h), 0 for the first launch: the rank
// sees it as ours, and as torchrun's, for programs that read that (torch's elastic agent sets
// TORCHELASTIC_RESTART_COUNT for its workers).
inline constexpr std::string_view kRestartCount = "TMPI_RESTART_COUNT";
inline constexpr std::string_view kTorchRestartCount = "TORCHELASTIC_RESTART_COUNT";
// The data variables that every agent is handed (the rank inherits them).
inline constexpr std::array kAgentData = {kSlotLayout, kRankHosts, kRestartCount, kTorchRestartCount};

// For mpi-ssh, in mpirun's environment: the launcher's ssh relay's socket (ssh/relay.h).
inline constexpr std::string_view kSshRelay = "TMPI_SSH_RELAY";
// For `mpi-launcher shell`: the exact MPI command the job runs, for a person to run by hand.
inline constexpr std::string_view kMpiCommand = "TMPI_MPI_COMMAND";
// Set in everything the launcher starts, so that the image's mpirun hand-off
// (launcher/mpirun_handoff.sh) runs the real mpirun for a call from within the launcher.
inline constexpr std::string_view kLauncherPid = "TMPI_LAUNCHER_PID";
// The last variable of every child's environment, of no meaning: MPICH 4.0's hydra drops
// the last one (common/process.cpp).
inline constexpr std::string_view kEnvironEnd = "TMPI_ENVIRON_END";

}  // namespace tmpi::contract

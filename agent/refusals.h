// The rank not started, and why, said where a person reads it and reported to the launcher:
// a rank on another host than the hostfile gives it (agent/placement.h), the start gate's
// "stop" or silence (agent/gate.h), and a fork that failed. Each returns the agent's exit code.
#pragma once

#include "agent/agent_options.h"
#include "agent/placement.h"
#include "agent/reports.h"

namespace tmpi::launch {

int refuse_misplaced(const RankAgentOptions& options, const RankIdentity& id, const Misplacement& wrong);
// 0 when the rank may start; else the agent's exit code.
int pass_start_gate(const RankAgentOptions& options, const RankIdentity& id);
int refuse_unforked(const RankAgentOptions& options, const RankIdentity& id, int error);

}  // namespace tmpi::launch

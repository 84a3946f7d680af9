// What a rank agent is told: its coordinator, the job key for its proofs, its beats, and
// what its start gate does. Its own header, so that the agent (agent.h) and its start gate
// (gate.h) both take it without including each other; agent/options.h fills it from the
// parameters at the programs' edge.
#pragma once

#include <cstddef>
#include <string>

#include "common/backoff.h"

namespace tmpi::launch {

struct RankAgentOptions {
  std::string coordinator;  // host:port of the launcher's coordinator ("" = do not report)
  std::string private_key;  // the job key, for the reports' proofs
  std::string master_addr, master_port;
  std::size_t tail_lines = 20;
  Millis beat_interval{5000};  // a running rank's beat: its pod lives (rendezvous/protocol.h)
  // The coordinator counts a host lost after this long without a beat, and ends the job. An
  // agent that reached the coordinator once, then hears nothing for this long and one beat
  // more, is on the far side of a partition (or the launcher is gone): it ends its rank,
  // which nobody can stop any more, and exits 75 (agent/agent.cpp, orphaned()).
  Millis lost_after{15000};
  // Ask the coordinator before the rank starts, and hold it until the answer is "start"
  // (TMPI_START_GATE, set by the launcher when its ssh check runs beside the launch: agent/gate.h).
  bool start_gate = false;
  // The launch's epoch (TMPI_EPOCH, from the launcher), in every request: the coordinator
  // refuses a request of another launch (docs/design.md, "The session and its threat model").
  std::string epoch;
  // A gate that cannot be asked, or gives no answer that verifies, within lost_after: the rank
  // does not start (exit 75), unless this opt-out (TMPI_GATE_FAIL_OPEN) says to start it.
  bool gate_fail_open = false;
};

}  // namespace tmpi::launch

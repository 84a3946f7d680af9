// What `mpi-launcher run`, `check`, `shell` and `hosts` share: the job as the launcher sees
// it (topology, key, MPI flavour and the exact command), built from the parameters once.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/topology.h"
#include "launcher/choices.h"
#include "launcher/mpi_command.h"

namespace tmpi::launch {

struct Job {
  Topology topology;
  std::string ssh_dir, key_path, private_key;
  std::string launcher_name;               // this pod's host name (the coordinator's address)
  std::string epoch;                       // this attempt's, drawn at random (docs/design.md)
  LaunchPlan plan;                         // with the agent-wrapped user command
  std::map<std::string, std::string> env;  // set for mpirun and forwarded to ranks
  std::shared_ptr<ScratchDir> scratch;     // hydra's ssh wrapper lives here; removed with the job
  // The preflight runs the placement probe job: --placement probe, or too many hosts to pass
  // their names to the agents (agent/placement.h).
  bool probe_placement = false;
  // The ranks go to the hosts by slot, as the hostfile gives them (expected_placement): no
  // mapping option of the user's, on the mpirun line or in the environment.
  bool placed_by_slot = true;
  // The ssh step runs beside the launch (JobOptions::start_gate), and no rank starts before
  // it passed: held by its agent at the start gate, or by the MPI's own launch order.
  bool start_gate = false;
  // The agents ask the start gate (TMPI_START_GATE=true): under hydra, or where a daemon may
  // start without the check's verdict on its host. Open MPI 4 and 5 start a daemon on every
  // host of the hostfile, and launch no rank before every daemon has reported back (ORTE's
  // and PRRTE's daemon callback: the citations are in agent/gate.h); mpirun starts each one
  // itself through the relay, which waits for that host's verdict (ssh/relay.h), as long as
  // its routing tree is one level: up to kMpirunTreeRadix hosts (past it, daemons start the
  // rest over ssh of their own), and with no routing tree of the user's in the environment.
  // There a daemon's start waits for its host's check, and the agents' 128 questions at 64
  // pods would cost the launch about 1 ms a pod (bench/README.md). run.cpp sets it again when
  // the relay cannot start.
  bool agents_ask = false;
};

// Open MPI's routing tree under mpirun: routed_radix, 64 by default (Open MPI 4.1,
// orte/mca/routed/radix/routed_radix_component.c; PRRTE 3.0, src/mca/routed/radix). Up to this
// many hosts, every daemon is mpirun's own child, started by mpirun's ssh (tree spawn or not).
inline constexpr std::size_t kMpirunTreeRadix = 64;

// This mpi-launcher's own path, and the path of a program installed beside it ("" when
// there is none): images put mpi-rank and nccl-check in the same folder.
std::string self_exe();
std::string beside_self(const std::string& name);

// What prepare_job needs of the launcher's settings.
struct JobOptions {
  std::string hosts_file;  // --hosts: hosts.json; the hostfiles lie beside it
  std::string ssh_dir;
  bool ssh_dir_given = false;  // then forwarded to the agents (TMPI_SSH_DIR)
  MpiWanted mpi = MpiWanted::kAuto;
  std::string mpirun;  // "" = mpirun, or mpiexec.hydra for hydra
  int np = 0;          // 0 = the sum of the slots
  int ssh_port = 0, rendezvous_port = 0;
  std::string iface, master_addr, master_port, log_level;
  std::chrono::milliseconds beat_interval{0}, lost_after{0};  // forwarded to the agents
  std::vector<std::string> env, env_prefixes;                 // --env, --env-prefix
  PlacementCheck placement = PlacementCheck::kAgents;
  // The preflight's ssh step may run beside the launch (--ssh-check beside, and nothing else
  // in the preflight runs an MPI job: no probe, no fabric check; run.cpp); the ranks' agents
  // then pass the start gate (agent/gate.h). prepare_job keeps it only with no placement probe.
  bool start_gate = false;
  // The user's own mpirun options (mpirun_line.h): `run [MPI OPTIONS] -- CMD`, --mpi-arg,
  // TMPI_MPI_ARG. With mpirun_line, the command itself is a whole mpirun line (the hand-off's).
  std::vector<std::string> mpi_words;
  bool mpirun_line = false;
  bool gate_fail_open = false;  // --gate-fail-open, passed to the agents
};

// Reads hosts.json and the key, detects the MPI, and builds the plan for `command`.
Expected<Job> prepare_job(const JobOptions& options, const std::vector<std::string>& command);

// An attempt's session (a new random epoch) and its number in the ranks' environment
// (TMPI_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT); prepare_job begins attempt 0.
void begin_attempt(Job& job, int attempt);

// The same plan for another command (the placement probe runs `hostname`), unwrapped.
LaunchPlan plan_for(const Job& job, std::vector<std::string> command, std::vector<std::string> extra_args);

}  // namespace tmpi::launch

// The rank agent (`mpi-launcher rank -- CMD`): MPI starts it as every rank. It reads the
// rank from PMIx or the implementation's variables, exports the torch-style variables
// that Megatron-LM and DeepSpeed read, runs CMD, forwards signals to it, keeps the last
// lines of its stderr, and reports its start and its exit (code or signal, and that tail)
// to the launcher's coordinator, so that the first failed rank stops the whole job. (A
// rank that exits 0 within 2 s reports nothing, mpirun's exit status says it, but for each
// host's first rank, whose start the coordinator expects: agent/reports.h.) Cut off from
// the coordinator, it ends its rank itself, and all the rank started: it becomes their
// subreaper then, so a wrapper shell's python cannot slip away as an orphan when the shell
// ends first. Only then: a job that ends as usual is ended by its MPI daemon, as before.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/agent_options.h"
#include "common/error.h"

namespace tmpi::launch {

struct RankIdentity {
  int rank = -1, world_size = -1, local_rank = -1, local_world_size = -1, node_rank = -1;
};

// Open MPI (OMPI_COMM_WORLD_*), PMIx (PMIX_RANK), MPICH and Intel hydra (PMI_RANK,
// PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS). NODE_RANK, the index of this rank's host:
// from TMPI_SLOT_LAYOUT (the launcher's slots per host in hostfile order, run-length
// coded: "8x96,4x32"), else (rank - local rank) / local size, which holds when every host
// has the same slots. (OMPI_COMM_WORLD_NODE_RANK is not that: it is a local rank.)
Expected<RankIdentity> rank_identity(const std::map<std::string, std::string>& env);

// "8,8,4" -> "8x2,4x1": the compact layout the launcher passes to every rank.
std::string slot_layout(const std::vector<int>& slots);

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT.
std::map<std::string, std::string> torch_env(const RankIdentity& id, const std::string& master_addr,
                                             const std::string& master_port);

// Runs command as this rank; returns the exit status to pass on (128+signal for a signal).
int run_rank(const RankAgentOptions& options, const std::map<std::string, std::string>& env,
             const std::vector<std::string>& command);

// What `mpi-rank -- CMD` and `mpi-launcher rank -- CMD` are told (agent/options.h reads it
// from the parameters): the agent's options, and where to look for the job key.
struct RankCommandOptions {
  RankAgentOptions agent;  // its private_key is found by rank_command
  std::string ssh_dir;
  bool ssh_dir_given = false;  // the launcher forwarded it (TMPI_SSH_DIR)
};

// Finds the job key, then run_rank. The rank's own status becomes the Error's exit code
// (128+N for a signal), with no message: the rank has said what it had to.
Status rank_command(RankCommandOptions options, const std::vector<std::string>& command);

}  // namespace tmpi::launch

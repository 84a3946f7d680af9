// The rank's identity as its MPI gives it (rank_identity), the slots' layout that the
// launcher hands every agent (slot_layout, agent/contract.h), and the variables torch reads
// (torch_env): pure functions of their inputs, split from agent.cpp, which runs the rank.
#include <string>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/contract.h"
#include "agent/placement.h"

namespace tmpi::launch {

namespace {

int int_of(const std::map<std::string, std::string>& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty() &&
        it->second.find_first_not_of("0123456789") == std::string::npos) {
      return std::stoi(it->second);
    }
  }
  return -1;
}

}  // namespace

Expected<RankIdentity> rank_identity(const std::map<std::string, std::string>& env) {
  RankIdentity id;
  id.rank = int_of(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  id.world_size = int_of(env, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"});
  id.local_rank = int_of(env, {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"});
  id.local_world_size = int_of(env, {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"});
  if (id.rank < 0 || id.world_size < 1) {
    return make_error(Exit::kUsage,
                      "no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK); "
                      "`mpi-launcher rank` runs under mpirun or mpiexec");
  }
  if (id.local_rank < 0) id.local_rank = 0;
  if (id.local_world_size < 1) id.local_world_size = 1;
  id.node_rank = (id.rank - id.local_rank) / id.local_world_size;
  if (auto layout = env.find(std::string(contract::kSlotLayout)); layout != env.end()) {
    if (int host = layout_host(id.rank, layout->second); host >= 0) id.node_rank = host;
  }
  return id;
}

std::string slot_layout(const std::vector<int>& slots) {
  std::string out;
  for (std::size_t i = 0; i < slots.size();) {
    std::size_t j = i;
    while (j < slots.size() && slots[j] == slots[i]) ++j;
    out += fmt::format("{}{}x{}", out.empty() ? "" : ",", slots[i], j - i);
    i = j;
  }
  return out;
}

std::map<std::string, std::string> torch_env(const RankIdentity& id, const std::string& master_addr,
                                             const std::string& master_port) {
  return {{"RANK", std::to_string(id.rank)},
          {"WORLD_SIZE", std::to_string(id.world_size)},
          {"LOCAL_RANK", std::to_string(id.local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(id.local_world_size)},
          {"NODE_RANK", std::to_string(id.node_rank)},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", master_port}};
}

}  // namespace tmpi::launch

// mpi-rank: the rank agent as a binary of its own. MPI starts it once per rank, so its
// start-up is the launcher's overhead over plain mpirun: it links no shared library but
// libc (see tmpi_common_lean), and does only what `mpi-launcher rank` does.
#include <iostream>

#include "agent/agent.h"
#include "agent/options.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/params.h"

namespace {

tmpi::Status agent(const std::vector<std::string>& args) {
  TMPI_ASSIGN(tmpi::Params params, tmpi::Params::parse(tmpi::kScopeRank, args, tmpi::current_environment()));
  if (params.help_requested()) {
    std::cout << tmpi::help_text("mpi-rank -- CMD ARGS...   (run by MPI for every rank)", tmpi::kScopeRank);
    return tmpi::ok_status();
  }
  TMPI_CHECK(tmpi::log::setup_from("mpi-rank", params));
  return tmpi::launch::rank_command(tmpi::launch::rank_options(params), params.rest());
}

}  // namespace

int main(int argc, char** argv) {
  return tmpi::cli::run("mpi-rank", argc, argv, agent);
}

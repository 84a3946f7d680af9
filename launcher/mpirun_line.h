// A user's own mpirun options under mpi-launcher: what the launcher owns is checked against
// the job, everything else passes to mpirun in the user's order, after the launcher's own
// options (so binding, mapping, MCA parameters, -x, --tag-output, --report-bindings and
// --oversubscribe reach mpirun as the user wrote them).
//
// Owned, and taken where they agree with the job (then left out: the launcher's own stand):
//   the hostfile (the same hosts and slots as the job's, any order, short or full names),
//   the host list (each job host once, slots as the job's), -np (one number, the launcher's
//   --np if it has one), the rsh agent when it is ssh, hydra's -launcher ssh, --mca plm rsh.
// Where they conflict, one error names both values; exit 64.
// Refused by name, with the reason (exit 64): another rsh agent or launcher, ssh arguments of
// the user's (the launcher gives ssh the job's port, key and known_hosts), a hostfile or host
// list of other hosts, an app file or an MPMD ':' (each rank must run under the rank agent),
// and hydra's -genvall/-genvnone (hydra takes one global env choice, and the launcher's is
// -genvlist: the user's -genvlist names join it).
// Refused by name as the MPI's mpirun refuses it (exit 64), before anything runs: an option
// the MPI's grammar does not know (with the other MPI's name for it: -ppn under Open MPI is
// --map-by ppr:N:node), and under Open MPI (4 and 5) an -np past the job's slots without
// --oversubscribe or a --map-by ...:OVERSUBSCRIBE (hydra oversubscribes by itself: allowed).
// An option that places ranks other than by slot (--map-by ppr:1:node, --rank-by node, -ppn)
// turns the agents' by-slot placement check off, and where it says how many ranks a host runs
// and no -np is given, the rank count follows from it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "launcher/mpirun_grammar.h"

namespace tmpi::launch {

struct JobHost {
  std::string name;
  int slots = 1;
};

struct LineContext {
  std::vector<JobHost> hosts;  // in hostfile order
  std::string hostfile;        // the job's, named in messages
  int np = 0;                  // the launcher's --np; 0 when not given
  bool as_root = false;        // the launcher passes --allow-run-as-root itself
  std::function<Expected<std::string>(const std::string&)> read_file;
};

struct TakenLine {
  int np = 0;                          // the line's rank count, said or implied; 0 = none
  std::vector<std::string> passed;     // to mpirun, in the user's order
  std::vector<std::string> env_names;  // hydra's -genvlist names, joined to the launcher's
  std::string placement;               // the option that places ranks other than by slot
};

Expected<TakenLine> take_mpirun_line(const MpirunLine& line, const LineContext& job);

// `mpi-launcher run`'s words before "--", split into the launcher's own parameters (and
// their values) and the MPI options; `--mpi-arg WORD` puts WORD with the MPI options, for a
// word that the launcher would otherwise read as its own (--timeout). The words after "--"
// stay with the launcher's.
struct RunArgs {
  std::vector<std::string> launcher_args;
  std::vector<std::string> mpi_words;
};
RunArgs split_run_args(const std::vector<std::string>& args, unsigned scope);

// TMPI_MPI_ARG: MPI options as words split at white space.
std::vector<std::string> split_words(std::string_view text);

}  // namespace tmpi::launch

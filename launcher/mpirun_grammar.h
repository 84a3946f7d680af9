// The mpirun command-line grammar of each MPI, as a pure parser: a user's own mpirun line
// (Horovod's, mpi-operator's, years of tuning) is split into its options, each with the words
// it was given as, and the command. Nothing here decides what to do with an option; that is
// mpirun_line.h, which checks the options the launcher owns against the job.
//
// The rules, read from each MPI's source:
//   Open MPI 4 (ORTE):  orte/mca/schizo/ompi/schizo_ompi.c (cmd_line_init: each option's
//     names and how many values it takes), orte/orted/orted_submit.c (-mca/--mca/-gmca/--gmca
//     K V, -am/-tune FILE), opal/util/cmd_line.c (a name matches after one or two dashes).
//   Open MPI 5 (PRRTE): openpmix/prrte src/mca/schizo/ompi/schizo_ompi.c (the ompi
//     personality: its options, the deprecated single-dash forms it rewrites to "--", the
//     --mca/--prtemca/--pmixmca pairs) on PMIx's getopt_long (so "--name=value" works).
//   hydra (MPICH, Intel MPI): pmodels/mpich src/pm/hydra/mpiexec/options.c
//     (HYD_mpiexec_match_table; -genv/-env take "K V" or "K=V"), src/pm/hydra/lib/utils/args.c
//     (match_arg: any number of leading dashes, names compared without case, "name=value"
//     split at the first '=', the options end at the first word without a dash).
// "--name=value" is read as the option and its value in every grammar (ORTE's own parser
// would refuse it; the launcher takes the owned ones and passes the others as given).
// The value rule of an option that no table lists: it takes no value, unless given as
// "--name=value". Where the options end at "--" (`mpi-launcher run [MPI OPTIONS] -- CMD`),
// bare words after an unknown option are its values, kept in order; in a whole mpirun line
// the first bare word is the command, as in every MPI above. The parser only marks such an
// option (known = false); mpirun_line.h refuses it by name, as each MPI's mpirun does,
// before its value could become the command.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "launcher/mpi_command.h"

namespace tmpi::launch {

enum class Grammar { kOrte, kPrrte, kHydra };
Grammar grammar_of(Flavour flavour);

// What an option means to the launcher (mpirun_line.h); kPlain passes through untouched.
enum class Role {
  kPlain,
  kHostfile,       // --hostfile, --machinefile, -f
  kHosts,          // -H/--host, -hosts, -hostlist
  kNp,             // -np, -n, -c
  kEnv,            // -x NAME[=VALUE], -genv/-env NAME VALUE
  kEnvList,        // hydra's -genvlist A,B: one global list, which the launcher's own joins
  kEnvAll,         // hydra's -genvall/-genvnone: a global env choice, beside the launcher's list
  kMca,            // --mca K V and its kin
  kRshAgent,       // hydra's -launcher/-bootstrap
  kRshExec,        // hydra's -launcher-exec/-bootstrap-exec
  kMapping,        // where ranks go: --map-by, --rank-by, --rankfile, -ppn...
  kPerNode,        // N ranks on each host: --npernode N, -N N, -ppn N, -perhost N
  kPernode,        // one rank on each host
  kAppFile,        // --app FILE, -configfile FILE: the ranks' commands from a file
  kRunAsRoot,      // --allow-run-as-root
  kOversubscribe,  // Open MPI's --oversubscribe, --nooversubscribe: more ranks than slots or not
};

struct MpiOption {
  std::string name;                 // as matched, without dashes ("np", "mca", "x")
  std::vector<std::string> words;   // exactly as given, to pass on
  std::vector<std::string> values;  // its values, from after '=' or the next words
  Role role = Role::kPlain;
  bool known = true;  // false: in no table; passed through by the rule above
};

struct MpirunLine {
  Grammar grammar = Grammar::kOrte;  // the grammar it was read with
  std::vector<MpiOption> options;
  std::vector<std::string> command;  // the first bare word on, or what follows "--"
};

// `words`: mpirun's arguments (no argv[0]). ends_at_dashdash: the options end at "--" and
// every word before it is an option or a value (`mpi-launcher run`); else the first bare word
// is the command (a whole mpirun line). An option short of its values is a usage error.
Expected<MpirunLine> parse_mpirun_line(Grammar grammar, const std::vector<std::string>& words,
                                       bool ends_at_dashdash);

// Whether the grammar's table lists `name` (dashes stripped), as its parser would match it.
bool grammar_knows(Grammar grammar, std::string_view name);

// The MPI's mpirun a grammar is, for messages: "Open MPI 4's mpirun (ORTE)".
std::string_view grammar_name(Grammar grammar);

// What to say instead of an option that `grammar` does not know: the other MPI's name for it
// (-ppn under Open MPI: --map-by ppr:N:node), or which MPI's option it is.
std::string unknown_option_hint(Grammar grammar, std::string_view name);

// The option's words, joined for messages: "--map-by ppr:1:node".
std::string option_text(const MpiOption& option);

}  // namespace tmpi::launch

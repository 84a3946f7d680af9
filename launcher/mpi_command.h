// The MPI command line for each implementation, as a pure function of a LaunchPlan, so
// that every flavour (Intel MPI too, which cannot be installed here) is unit-tested and
// `--dry-run` prints exactly what runs. Everything is passed explicitly on the command
// line (hostfile, -np, the ssh agent with port, identity and known_hosts, the interface,
// the forwarded variables), never through variables that one version ignores: Open MPI 5
// ignores the ORTE ones and silently runs every rank on the launcher (Trainer #4028).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace tmpi::launch {

enum class Flavour { kOpenMpi4, kOpenMpi5, kMpich, kIntel };
const char* flavour_name(Flavour flavour);

// From the output of `<launcher> --version`.
Expected<Flavour> detect_flavour(std::string_view version_text);

// The first executable `program` on PATH (`program` itself when it holds a '/'), passing over
// one whose real path is `skip` (canonical; "" skips none). "" when there is none.
std::string find_program(const std::string& program, const std::string& path_variable,
                         const std::string& skip = "");

// Open MPI's major version from its install, without running anything: each runtime keeps
// its daemon beside its launcher (orted for ORTE, Open MPI 4; prted for PRRTE, Open MPI
// 5). `program` is resolved on PATH and through its symlinks (Debian's alternatives).
// nullopt when the install does not say, or the program is hydra's (MPICH and Intel MPI
// look alike on disk): then `--version` decides.
std::optional<Flavour> flavour_from_install(const std::string& program, const std::string& path_variable);

struct LaunchPlan {
  Flavour flavour = Flavour::kOpenMpi4;
  std::string launcher;  // mpirun, prterun or mpiexec.hydra (path)
  std::string hostfile;  // in the flavour's dialect
  int np = 1;
  std::string ssh_wrapper;  // an executable that runs ssh with the options below (hydra)
  // What MPI runs as ssh: mpi-ssh where it is installed beside the launcher (ssh/main.cpp: the
  // real ssh, unless the launch's environment names an ssh relay), else ssh.
  std::string ssh_agent = "ssh";
  std::vector<std::string> ssh_options;  // -p 2222 -i KEY -o UserKnownHostsFile=... ...
  std::string iface;                     // "" = let MPI choose
  std::vector<std::string> env_names;    // forwarded from the launcher's environment
  bool as_root = false;
  std::vector<std::string> extra_args;  // --mpi-args, before the command
  std::vector<std::string> command;     // the rank command (already wrapped by the agent)
};

std::vector<std::string> build_command(const LaunchPlan& plan);

// The environment names forwarded by default and by --env / --env-prefix (Trainer #3427),
// chosen from `environment` (names only; values travel through MPI).
std::vector<std::string> forwarded_env(const std::vector<std::string>& environment_names,
                                       const std::vector<std::string>& names,
                                       const std::vector<std::string>& prefixes);

// A shell-quoted rendering, for --dry-run and logs.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace tmpi::launch

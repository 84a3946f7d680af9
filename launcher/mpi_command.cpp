// See mpi_command.h. The flags per flavour:
//   Open MPI 4 (ORTE):  mpirun --hostfile H -np N --mca plm_rsh_agent ssh --mca plm_rsh_args
//                       "<ssh options>" [--mca btl_tcp_if_include I --mca oob_tcp_if_include I] -x V...
//   Open MPI 5 (PRRTE): the same with --prtemca plm_ssh_agent/plm_ssh_args/oob_tcp_if_include
//   MPICH hydra:        mpiexec.hydra -f H -np N -launcher ssh -launcher-exec WRAPPER [-iface I] -genvlist
//   V,... Intel MPI hydra:    mpiexec.hydra -f H -n N -bootstrap ssh -bootstrap-exec WRAPPER [-iface I]
//   -genvlist V,...
#include "launcher/mpi_command.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/ranges.h>

#include "agent/contract.h"
#include "common/params.h"

namespace tmpi::launch {

const char* flavour_name(Flavour flavour) {
  switch (flavour) {
    case Flavour::kOpenMpi4:
      return "openmpi4";
    case Flavour::kOpenMpi5:
      return "openmpi5";
    case Flavour::kMpich:
      return "mpich";
    case Flavour::kIntel:
      return "intel";
  }
  return "unknown";
}

Expected<Flavour> detect_flavour(std::string_view text) {
  auto has = [&](std::string_view needle) { return text.find(needle) != std::string_view::npos; };
  if (has("Intel(R) MPI")) return Flavour::kIntel;
  if (has("HYDRA") || has("MPICH")) return Flavour::kMpich;
  if (has("PRRTE") || has("prterun") || has("Open MPI) 5.") || has("Open MPI) 6.")) return Flavour::kOpenMpi5;
  if (has("Open MPI) 4.") || has("Open MPI) 3.") || has("OpenRTE")) return Flavour::kOpenMpi4;
  return make_error(Exit::kUsage,
                    "cannot tell which MPI this is from its --version ('{}'); pass --mpi "
                    "openmpi|mpich|intel",
                    text.substr(0, 80));
}

std::string find_program(const std::string& program, const std::string& path_variable,
                         const std::string& skip) {
  namespace fs = std::filesystem;
  if (program.find('/') != std::string::npos) return program;
  std::istringstream dirs(path_variable);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (access(candidate.c_str(), X_OK) != 0) continue;
    std::error_code error;
    if (!skip.empty() && fs::canonical(candidate, error) == fs::path(skip) && !error) continue;
    return candidate.string();
  }
  return "";
}

std::optional<Flavour> flavour_from_install(const std::string& program, const std::string& path_variable) {
  namespace fs = std::filesystem;
  fs::path found = find_program(program, path_variable);
  std::error_code error;
  fs::path real = found.empty() ? fs::path() : fs::canonical(found, error);
  if (real.empty() || error) return std::nullopt;
  if (real.filename().string().find("hydra") != std::string::npos) return std::nullopt;
  if (fs::exists(real.parent_path() / "prted", error)) return Flavour::kOpenMpi5;
  if (fs::exists(real.parent_path() / "orted", error)) return Flavour::kOpenMpi4;
  return std::nullopt;
}

std::vector<std::string> build_command(const LaunchPlan& plan) {
  std::vector<std::string> out = {plan.launcher};
  std::string ssh_args = fmt::format("{}", fmt::join(plan.ssh_options, " "));
  auto add = [&](std::initializer_list<std::string> words) { out.insert(out.end(), words); };
  switch (plan.flavour) {
    case Flavour::kOpenMpi4:
    case Flavour::kOpenMpi5: {
      bool prte = plan.flavour == Flavour::kOpenMpi5;
      std::string rte = prte ? "--prtemca" : "--mca";
      add({"--hostfile", plan.hostfile, "-np", std::to_string(plan.np)});
      add({rte, prte ? "plm_ssh_agent" : "plm_rsh_agent", plan.ssh_agent, rte,
           prte ? "plm_ssh_args" : "plm_rsh_args", ssh_args});
      if (!plan.iface.empty())
        add({"--mca", "btl_tcp_if_include", plan.iface, rte, "oob_tcp_if_include", plan.iface});
      if (plan.as_root) add({"--allow-run-as-root"});
      for (const auto& name : plan.env_names) add({"-x", name});
      break;
    }
    case Flavour::kMpich:
    case Flavour::kIntel: {
      bool intel = plan.flavour == Flavour::kIntel;
      add({"-f", plan.hostfile, intel ? "-n" : "-np", std::to_string(plan.np)});
      add({intel ? "-bootstrap" : "-launcher", "ssh", intel ? "-bootstrap-exec" : "-launcher-exec",
           plan.ssh_wrapper});
      if (!plan.iface.empty()) add({"-iface", plan.iface});
      if (!plan.env_names.empty()) add({"-genvlist", fmt::format("{}", fmt::join(plan.env_names, ","))});
      break;
    }
  }
  out.insert(out.end(), plan.extra_args.begin(), plan.extra_args.end());
  out.insert(out.end(), plan.command.begin(), plan.command.end());
  return out;
}

std::vector<std::string> forwarded_env(const std::vector<std::string>& environment_names,
                                       const std::vector<std::string>& names,
                                       const std::vector<std::string>& prefixes) {
  // GLOO_: torch.distributed's CPU backend (GLOO_SOCKET_IFNAME picks its interface).
  static const std::vector<std::string> kDefaultPrefixes = {"NCCL_", "UCX_",   "PYTHON",  "CUDA_",
                                                            "HF_",   "TORCH_", "MASTER_", "GLOO_"};
  // The image's own search paths: sshd starts the ranks with its default PATH, not the one
  // the image's ENV set (a venv's python, /opt/...); launcher and nodes run one image.
  static const std::vector<std::string> kDefaultNames = {"PATH", "LD_LIBRARY_PATH"};
  // What the rank agent reads on the nodes (agent/contract.h).
  static const std::vector<std::string> kAgent = [] {
    std::vector<std::string> agent_names;
    agent_names.reserve(contract::kAgentParameters.size() + contract::kAgentData.size());
    for (std::string_view parameter : contract::kAgentParameters) agent_names.push_back(env_name(parameter));
    for (std::string_view data : contract::kAgentData) agent_names.emplace_back(data);
    return agent_names;
  }();
  std::set<std::string> out(names.begin(), names.end());
  for (const auto& name : environment_names) {
    for (const auto* list : {&kAgent, &kDefaultNames}) {
      if (std::find(list->begin(), list->end(), name) != list->end()) out.insert(name);
    }
  }
  for (const auto& name : environment_names) {
    for (const auto* list : {&kDefaultPrefixes, &prefixes}) {
      for (const auto& prefix : *list) {
        if (name.rfind(prefix, 0) == 0) out.insert(name);
      }
    }
  }
  return {out.begin(), out.end()};
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    bool plain =
        !word.empty() &&
        word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@%+") ==
            std::string::npos;
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + (plain ? word : quoted + "'");
  }
  return out;
}

}  // namespace tmpi::launch

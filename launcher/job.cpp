// See job.h.
#include "launcher/job.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/contract.h"
#include "agent/placement.h"
#include "common/files.h"
#include "common/job_key.h"
#include "common/params.h"
#include "common/process.h"
#include "common/proof.h"
#include "common/self_path.h"
#include "launcher/mpirun_line.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {

std::string self_exe() {
  auto path = self_path();
  return path.empty() ? "mpi-launcher" : path;
}

std::string beside_self(const std::string& name) {
  auto beside = std::filesystem::path(self_exe()).parent_path() / name;
  return access(beside.c_str(), X_OK) == 0 ? beside.string() : "";
}

namespace {

Expected<Flavour> choose_flavour(MpiWanted wanted, std::string& program) {
  if (wanted == MpiWanted::kMpich || wanted == MpiWanted::kIntel) {
    if (program.empty()) program = "mpiexec.hydra";
    return wanted == MpiWanted::kMpich ? Flavour::kMpich : Flavour::kIntel;
  }
  const char* path = std::getenv("PATH");
  if (program.empty()) {
    // In the image, the first mpirun on PATH is the hand-off to this launcher
    // (launcher/mpirun_handoff.sh, installed beside it): run the MPI's own mpirun behind it.
    // Through the hand-off's bash, the ranks lost PATH under MPICH: bash reorders the
    // environment, and hydra drops whichever variable comes last (common/process.cpp).
    // Elsewhere the name stays bare: Open MPI takes an absolute mpirun as its --prefix.
    program = "mpirun";
    std::error_code error;
    std::string handoff = beside_self(program);
    if (!handoff.empty()) handoff = std::filesystem::canonical(handoff, error).string();
    if (!handoff.empty() && !error) {
      const std::string path_text = path != nullptr ? path : "";
      std::string real = find_program(program, path_text, handoff);
      if (!real.empty() && real != find_program(program, path_text))
        program = real;  // the hand-off came first
    }
  }
  if (auto installed = flavour_from_install(program, path != nullptr ? path : ""); installed)
    return *installed;
  auto version = run_capture({program, "--version"}, {}, Millis(10000));
  if (!version) {
    return make_error(Exit::kUsage,
                      "cannot run `{} --version` to tell the MPI: {}; pass --mpi and --mpirun{}", program,
                      version.error().message, trouble_note(Trouble::kMpiNotFound));
  }
  TMPI_ASSIGN(Flavour flavour, detect_flavour(version->output));
  if (wanted == MpiWanted::kOpenMpi && flavour != Flavour::kOpenMpi4 && flavour != Flavour::kOpenMpi5) {
    return make_error(Exit::kUsage, "--mpi openmpi, but {} is {}; pass --mpirun PATH{}", program,
                      flavour_name(flavour), trouble_note(Trouble::kMpiNotFound));
  }
  return flavour;
}

// The user's mpirun options, read with the flavour's grammar and checked against the job
// (mpirun_line.h); `command` is the rank command, taken out of a whole mpirun line.
Expected<TakenLine> take_user_line(const JobOptions& options, const Job& job,
                                   std::vector<std::string>& command) {
  if (options.mpi_words.empty() && !options.mpirun_line) return TakenLine{};
  std::vector<std::string> words = options.mpi_words;
  if (options.mpirun_line) words.insert(words.end(), command.begin(), command.end());
  TMPI_ASSIGN(MpirunLine line, parse_mpirun_line(grammar_of(job.plan.flavour), words, !options.mpirun_line));
  if (options.mpirun_line) command = line.command;
  LineContext context{{}, job.plan.hostfile, options.np, getuid() == 0, [](const std::string& path) {
                        return read_file(path, 1U << 20);
                      }};
  for (const auto& host : job.topology.hosts) context.hosts.push_back({host.name, host.slots});
  TMPI_ASSIGN(TakenLine taken, take_mpirun_line(line, context));
  if (command.empty())
    return make_error(Exit::kUsage, "no command in the mpirun line: mpirun [OPTIONS] CMD ARGS...");
  return taken;
}

// hosts.json, the job key, and this pod's name (the launcher's, in hosts.json, else the
// host name).
Status read_job_files(const JobOptions& options, Job& job) {
  std::error_code missing;
  if (!std::filesystem::exists(options.hosts_file, missing))
    return make_error(
        Exit::kIo,
        "no hosts file at {} (--hosts, TMPI_HOSTS): mpi-init writes it, in the runtimes' launcher pod "
        "at /etc/trainer-mpi/hosts.json; outside a pod, write one with `mpi-init --hostfile FILE --out "
        "DIR` (or --pods, --replicated-jobs) and pass --hosts DIR/hosts.json",
        options.hosts_file);
  TMPI_ASSIGN(std::string hosts_text, read_file(options.hosts_file));
  TMPI_ASSIGN(job.topology, parse_hosts_json(hosts_text, options.hosts_file));
  job.ssh_dir = options.ssh_dir;
  TMPI_ASSIGN(KeyFile key, find_job_key(job.ssh_dir));
  job.key_path = std::move(key.path);
  job.private_key = std::move(key.text);
  if (job.topology.launcher) {
    job.launcher_name = job.topology.launcher->name;
  } else {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    job.launcher_name = name;
  }
  return ok_status();
}

// MPI's ssh: the job key, the pinned host keys, and mpi-ssh where it is installed.
Status plan_ssh(const JobOptions& options, Job& job, bool hydra) {
  LaunchPlan& plan = job.plan;
  plan.ssh_options = {"-F", "/dev/null",
                      "-p", std::to_string(options.ssh_port),
                      "-i", job.key_path,
                      "-o", "IdentitiesOnly=yes",
                      "-o", "UserKnownHostsFile=" + job.ssh_dir + "/known_hosts",
                      "-o", "StrictHostKeyChecking=yes",
                      "-o", "BatchMode=yes",
                      "-o", "KexAlgorithms=curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256",
                      "-o", "LogLevel=ERROR"};
  // mpi-ssh, installed beside the launcher, is ssh itself unless a launch names its relay
  // (ssh/relay.h); an absolute path, since MPI looks its agent up on PATH otherwise.
  if (std::string agent = beside_self("mpi-ssh"); !agent.empty()) plan.ssh_agent = agent;
  if (!hydra) return ok_status();
  // hydra takes a program, not arguments, for ssh: a two-line wrapper carries them. It
  // lives in a private folder of unguessable name, gone when the job is.
  TMPI_ASSIGN(job.scratch, ScratchDir::make("tmpi-ssh"));
  plan.ssh_wrapper = job.scratch->path() + "/ssh";
  return write_atomic(
      plan.ssh_wrapper,
      "#!/bin/sh\nexec " + shell_join({plan.ssh_agent}) + " " + shell_join(plan.ssh_options) + " \"$@\"\n",
      {0755});
}

// The agents' parameters that every job sets (agent/contract.h), and the slots' layout.
void set_agent_parameters(const JobOptions& options, Job& job) {
  job.env = {
      {env_name(param::kCoordinator.name), fmt::format("{}:{}", job.launcher_name, options.rendezvous_port)},
      {env_name(param::kMasterAddr.name),
       options.master_addr.empty() ? job.topology.hosts.front().name : options.master_addr},
      {env_name(param::kMasterPort.name), options.master_port},
      {env_name(param::kLogLevel.name), options.log_level},
      // The agents beat as often as the coordinator expects (--lost-after counts them).
      {env_name(param::kBeatInterval.name), fmt::format("{}ms", options.beat_interval.count())},
      // ... and give up on it as late as it gives up on them (an agent cut off ends its rank).
      {env_name(param::kLostAfter.name), fmt::format("{}ms", options.lost_after.count())}};
  begin_attempt(job, 0);
  std::vector<int> slots;
  for (const auto& host : job.topology.hosts) slots.push_back(host.slots);
  job.env[std::string(contract::kSlotLayout)] = slot_layout(slots);
  // The agents find the job key where the launcher was told it is (launcher and nodes run one
  // image and one runtime); without it they would look in their $HOME/.ssh and, finding no key
  // there, could not report which rank failed.
  if (options.ssh_dir_given) job.env[env_name(param::kSshDir.name)] = options.ssh_dir;
}

}  // namespace

// Every attempt is a session of its own: a request captured in one is refused by the next
// (docs/design.md, "The session and its threat model"); its ranks see its number.
void begin_attempt(Job& job, int attempt) {
  job.epoch = random_nonce();
  job.env[env_name(param::kEpoch.name)] = job.epoch;
  job.env[std::string(contract::kRestartCount)] = std::to_string(attempt);
  job.env[std::string(contract::kTorchRestartCount)] = std::to_string(attempt);
}

namespace {

// A mapping of the user's set in the environment rather than on the mpirun line: Open MPI's
// and PRRTE's rmaps parameters, Intel MPI's ranks per host. "" when there is none.
std::string placement_from_env() {
  for (const auto& [name, value] : current_environment()) {
    if (name.starts_with("OMPI_MCA_rmaps") || name.starts_with("PRTE_MCA_rmaps") || name == "I_MPI_PERHOST")
      return fmt::format("{}={}", name, value);
  }
  return "";
}

// Each agent checks its own host before it starts its rank (agent/placement.h), given the
// hosts in rank order; past kMaxRankHostsBytes, or under --placement probe, the preflight's
// probe job checks instead. A user's mpirun option that places by other than slot (or such a
// variable): neither.
void choose_placement_check(const JobOptions& options, Job& job, std::string user_placement) {
  if (user_placement.empty()) user_placement = placement_from_env();
  job.probe_placement = options.placement == PlacementCheck::kProbe && user_placement.empty();
  job.placed_by_slot = user_placement.empty();
  if (!user_placement.empty()) {
    spdlog::info(
        "placement: {} places ranks other than by slot; the agents' by-slot "
        "placement check is off",
        user_placement);
    return;
  }
  if (options.placement == PlacementCheck::kNone) return;
  std::vector<std::string> order;
  for (const auto& host : job.topology.hosts) order.push_back(host.name);
  if (std::string joined = join_hosts(order); joined.size() <= kMaxRankHostsBytes) {
    job.env[std::string(contract::kRankHosts)] = std::move(joined);
  } else {
    spdlog::info(
        "placement: the names of {} hosts are {} bytes, too many to pass to every rank; the "
        "preflight's probe job checks the placement instead",
        order.size(), joined.size());
    job.probe_placement = true;
  }
}

// The ssh step beside the launch, and the start gate (agent/gate.h): said to the agents
// either way, so that a TMPI_START_GATE in the launcher's own environment cannot hold ranks
// that no gate will let go. Returns the names of the launcher's environment.
std::vector<std::string> choose_start_gate(const JobOptions& options, Job& job, bool hydra) {
  job.start_gate = options.start_gate && !job.probe_placement;
  // A routing tree of the user's (OMPI_MCA_routed*, PRTE_MCA_routed*: another radix, binomial)
  // may have daemons start others over their own ssh: then the agents ask too (job.h).
  bool own_tree = false;
  std::vector<std::string> names;
  for (const auto& [name, value] : current_environment()) {
    names.push_back(name);
    own_tree = own_tree || name.starts_with("OMPI_MCA_routed") || name.starts_with("PRTE_MCA_routed");
  }
  job.agents_ask = job.start_gate && (hydra || own_tree || job.topology.hosts.size() > kMpirunTreeRadix);
  job.env[env_name(param::kStartGate.name)] = job.agents_ask ? "true" : "false";
  job.env[env_name(param::kGateFailOpen.name)] = options.gate_fail_open ? "true" : "false";
  return names;
}

}  // namespace

Expected<Job> prepare_job(const JobOptions& options, const std::vector<std::string>& command) {
  Job job;
  TMPI_CHECK(read_job_files(options, job));
  LaunchPlan& plan = job.plan;
  plan.launcher = options.mpirun;
  TMPI_ASSIGN(plan.flavour, choose_flavour(options.mpi, plan.launcher));
  bool hydra = plan.flavour == Flavour::kMpich || plan.flavour == Flavour::kIntel;
  std::string dir = std::filesystem::path(options.hosts_file).parent_path().string();
  plan.hostfile = dir + (hydra ? "/hostfile.hydra" : "/hostfile");
  std::vector<std::string> user_command = command;
  TMPI_ASSIGN(TakenLine user_line, take_user_line(options, job, user_command));
  plan.extra_args = user_line.passed;
  plan.np = options.np > 0 ? options.np : user_line.np > 0 ? user_line.np : job.topology.total_slots();
  if (plan.np < 1) return make_error(Exit::kUsage, "--np {}: needs 1 or more ranks", plan.np);
  TMPI_CHECK(plan_ssh(options, job, hydra));
  plan.iface = options.iface;
  plan.as_root = getuid() == 0;
  set_agent_parameters(options, job);
  choose_placement_check(options, job, user_line.placement);
  std::vector<std::string> names = choose_start_gate(options, job, hydra);
  for (const auto& [name, value] : job.env) names.push_back(name);
  std::vector<std::string> wanted = options.env;
  wanted.insert(wanted.end(), user_line.env_names.begin(), user_line.env_names.end());
  plan.env_names = forwarded_env(names, wanted, options.env_prefixes);
  // The lean agent where it is installed beside mpi-launcher, else this binary's `rank`.
  std::string agent = beside_self("mpi-rank");
  plan.command = agent.empty() ? std::vector<std::string>{self_exe(), "rank", "--"}
                               : std::vector<std::string>{agent, "--"};
  plan.command.insert(plan.command.end(), user_command.begin(), user_command.end());
  return job;
}

LaunchPlan plan_for(const Job& job, std::vector<std::string> command, std::vector<std::string> extra_args) {
  LaunchPlan plan = job.plan;
  plan.command = std::move(command);
  plan.extra_args = std::move(extra_args);
  return plan;
}

}  // namespace tmpi::launch

// mpi-launcher: the launcher pod's main command.
//   run [options] [MPI OPTIONS] -- CMD ARGS   wait for the hosts, preflight, launch, supervise, report
//   check                       the preflight alone, as a table
//   hosts                       the health table, from the coordinator or (no job) hosts.json
//   shell                       an interactive shell ready for mpirun (kubectl exec -it)
//   convert FILE|-              an MPIJob (v2beta1) as a TrainJob on our runtimes (convert/convert.h)
//   rank -- CMD                 the rank agent (MPI runs it as every rank)
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/contract.h"
#include "agent/options.h"
#include "common/cli.h"
#include "common/files.h"
#include "common/json_fields.h"
#include "common/log.h"
#include "common/params.h"
#include "common/plain_http.h"
#include "common/topology.h"
#include "convert/convert.h"
#include "launcher/help_topics.h"
#include "launcher/job.h"
#include "launcher/mpirun_line.h"
#include "launcher/options.h"
#include "launcher/run.h"

namespace tmpi::launch {

namespace {

constexpr const char* kSynopsis =
    "mpi-launcher run [options] [MPI OPTIONS] -- CMD ARGS...\n"
    "       mpi-launcher run [options] --mpirun-line -- MPIRUN-OPTIONS CMD ARGS...\n"
    "       mpi-launcher check | hosts | shell [options]\n"
    "       mpi-launcher convert [--runtime NAME] [--output FILE] MPIJOB.yaml|-\n"
    "       mpi-launcher help [TOPIC]   (a failure's troubleshooting KEY, or exit-codes)\n"
    "       mpi-launcher --version\n"
    "       mpi-launcher rank -- CMD ARGS...   (run by MPI for every rank)";

// The health table, from the coordinator's GET /v1/hosts or built the same way (below).
// Read field by field, checked for shape (json_fields.h).
void print_health(const nlohmann::json& table) {
  std::cout << fmt::format("barrier {}: {}/{} hosts ready\n", string_at(table, "/barrier", "?"),
                           int_at(table, "/ready", 0), int_at(table, "/expected", 0));
  const auto* rows = node_at(table, "/hosts");
  for (const auto& host : rows != nullptr && rows->is_array() ? *rows : nlohmann::json::array()) {
    std::cout << fmt::format("{:<40} {:<11} {:<16} {}\n", string_at(host, "/name"), string_at(host, "/state"),
                             string_at(host, "/address"), string_at(host, "/reason"));
  }
}

// With no job running, no coordinator answers: the same table from hosts.json, where every
// host is one that nobody has heard from yet (the README promises the table, not the file).
Status hosts(const LauncherOptions& options) {
  std::string coordinator = options.coordinator;
  if (coordinator.empty()) coordinator = fmt::format("127.0.0.1:{}", options.job.rendezvous_port);
  auto answer = plain_http("GET", coordinator, "/v1/hosts", "", Millis(3000));
  if (answer && answer->status == 200) {
    print_health(parse_object(answer->body));
    return ok_status();
  }
  TMPI_ASSIGN(std::string text, read_file(options.job.hosts_file));
  TMPI_ASSIGN(Topology topology, parse_hosts_json(text, options.job.hosts_file));
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& host : topology.hosts)
    rows.push_back({{"name", host.name},
                    {"state", "waiting"},
                    {"address", host.address},
                    {"reason", "not yet heard from"}});
  std::cout << fmt::format("(no coordinator answers at {}: no job is running; the hosts of {})\n",
                           coordinator, options.job.hosts_file);
  print_health(
      {{"barrier", "not-started"}, {"ready", 0}, {"expected", topology.hosts.size()}, {"hosts", rows}});
  return ok_status();
}

// `ssh HOST` in the shell reaches the job's pods as MPI's daemons do (the job's port and
// key, its pinned host keys), through mpi-ssh: so a uid with no passwd entry, which
// OpenSSH's client refuses ("No user exists for uid N"), still runs commands there, with
// mpi-ssh-client. The wrapper lives in the job's ssh folder, written anew each time, and
// comes first on the shell's PATH; it runs with the PATH the shell was given, so that
// mpi-ssh finds the real ssh, never the wrapper. Returns its folder.
Expected<std::string> write_shell_ssh(const Job& job, const std::string& path) {
  std::string folder = job.ssh_dir + "/bin";
  TMPI_CHECK(make_dirs(folder, 0700));
  std::string script =
      "#!/bin/sh\n# ssh to the job's pods as its MPI runs it (written by mpi-launcher shell)\nPATH=" +
      shell_join({path}) + "\nexport PATH\nexec " + shell_join({job.plan.ssh_agent}) + " " +
      shell_join(job.plan.ssh_options) + " \"$@\"\n";
  TMPI_CHECK(write_atomic(folder + "/ssh", script, {0755}));
  return folder;
}

Status shell(const LauncherOptions& options) {
  // No launcher runs a start gate for the commands typed here: TMPI_START_GATE=false, or an
  // agent would wait --lost-after for an answer before it started its rank.
  JobOptions job_options = options.job;
  job_options.start_gate = false;
  TMPI_ASSIGN(Job job, prepare_job(job_options, {"YOUR_PROGRAM"}));
  std::cout << fmt::format("trainer-mpi shell: {} hosts, {} slots, {} ({})\n", job.topology.hosts.size(),
                           job.topology.total_slots(), flavour_name(job.plan.flavour), job.plan.launcher);
  for (const auto& host : job.topology.hosts)
    std::cout << fmt::format("  {} slots={}\n", host.name, host.slots);
  std::cout << "The exact MPI command (YOUR_PROGRAM as each rank):\n  " << shell_join(build_command(job.plan))
            << "\n"
            << "Preflight: mpi-launcher check      Health: mpi-launcher hosts\n";
  const char* inherited = std::getenv("PATH");
  std::string path = inherited != nullptr ? inherited : "/usr/local/bin:/usr/bin:/bin";
  if (auto folder = write_shell_ssh(job, path)) {
    std::cout << "ssh HOST [COMMAND]: to the job's pods, as MPI reaches them\n";
    setenv("PATH", (*folder + ":" + path).c_str(), 1);
  } else {
    std::cout << "ssh to the job's pods is not set up here: " << folder.error().message << "\n";
  }
  for (const auto& [name, value] : job.env) setenv(name.c_str(), value.c_str(), 1);
  setenv(std::string(contract::kMpiCommand).c_str(), shell_join(build_command(job.plan)).c_str(), 1);
  std::cout.flush();  // exec replaces the process: what is buffered would be lost
  const char* user_shell = std::getenv("SHELL");
  std::string program = user_shell != nullptr ? user_shell : "/bin/bash";
  execl(program.c_str(), program.c_str(), "-i", nullptr);
  return make_error(Exit::kUsage, "cannot start {}", program);
}

// The converter's edge: the MPIJob from a file or stdin (bounded), the TrainJob to stdout or
// --output (atomically); on stderr the image it keeps with what that image must have, and
// each field without a home, with its advice.
Status convert_subcommand(const Params& params) {
  if (params.positional().size() != 1)
    return make_error(Exit::kUsage, "convert takes one MPIJob: a file, or - for stdin (see --help)");
  std::string source = params.positional()[0];
  TMPI_ASSIGN(std::string text, read_file(source == "-" ? "/dev/stdin" : source, convert::kMaxManifestBytes));
  TMPI_ASSIGN(convert::Doc mpijob, convert::parse_manifest(text, source));
  auto converted = convert::convert_mpijob(mpijob, convert::ConvertOptions{params.str(param::kRuntime)});
  if (!converted) return make_error(converted.error().exit, "{}: {}", source, converted.error().message);
  std::string yaml = convert::emit_yaml(converted->trainjob);
  const std::string& output = params.str(param::kOutput);
  if (output.empty())
    std::cout << yaml << std::flush;
  else
    TMPI_CHECK(write_atomic(output, yaml));
  std::cerr << fmt::format("mpi-launcher convert: {}\n", convert::kept_image_notice(converted->kept));
  for (const auto& field : converted->unmapped)
    std::cerr << fmt::format("mpi-launcher convert: {}: {}\n", field.field, field.advice);
  if (!converted->unmapped.empty())
    std::cerr << fmt::format(
        "mpi-launcher convert: {} field(s) of {} have no home in the TrainJob (docs/migrating.md, \"MPIJob "
        "v2beta1 "
        "fields\")\n",
        converted->unmapped.size(), source);
  return ok_status();
}

// `mpi-launcher help [TOPIC]` (help_topics.h): a topic's text, or the list of them.
Status help(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::cout << help_topics();
    return ok_status();
  }
  if (args.size() > 2)
    return make_error(Exit::kUsage, "help takes one topic; `mpi-launcher help` lists them");
  std::optional<std::string> text = help_topic(args[1]);
  if (!text) {
    std::cerr << help_topics();
    return make_error(Exit::kUsage, "no help topic '{}'; the topics are listed above",
                      log::printable(args[1]));
  }
  std::cout << *text;
  return ok_status();
}

// Each subcommand reads its own options, and --help shows those: convert and rank share
// nothing with run's (common/params.h, the scopes).
unsigned scope_of(const std::string& command) {
  if (command == "convert") return kScopeConvert;
  if (command == "rank") return kScopeRank;
  return kScopeLauncher;
}

const char* synopsis_of(const std::string& command) {
  if (command == "convert") return "mpi-launcher convert [--runtime NAME] [--output FILE] MPIJOB.yaml|-";
  if (command == "rank") return "mpi-launcher rank -- CMD ARGS...   (run by MPI for every rank)";
  return kSynopsis;
}

Status run(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << help_text(kSynopsis, kScopeLauncher);
    return args.empty() ? make_error(Exit::kUsage, "no subcommand; see --help") : ok_status();
  }
  std::string command = args[0];
  if (command == "help") return help(args);
  const unsigned scope = scope_of(command);
  // `run [MPI OPTIONS] -- CMD`: the words that are no parameter of the launcher's are mpirun's.
  RunArgs split{{args.begin() + 1, args.end()}, {}};
  if (command == "run") split = split_run_args(split.launcher_args, kScopeLauncher);
  TMPI_ASSIGN(Params params, Params::parse(scope, split.launcher_args, current_environment()));
  if (params.help_requested()) {
    std::cout << help_text(synopsis_of(command), scope);
    return ok_status();
  }
  TMPI_CHECK(log::setup_from("mpi-launcher", params));
  if (command == "rank") return rank_command(rank_options(params), params.rest());
  if (command == "convert") return convert_subcommand(params);
  LauncherOptions options = launcher_options(params);
  TMPI_ASSIGN(options.restart.retryable_exits,
              parse_exit_codes(params.list(param::kRetryableExitCodes), "--retryable-exit-codes"));
  options.job.mpi_words.insert(options.job.mpi_words.end(), split.mpi_words.begin(), split.mpi_words.end());
  // Whatever this launcher starts sees it: the image's mpirun hand-off (mpirun_handoff.sh)
  // then runs the real mpirun for it, instead of handing the job to another launcher. The
  // shell's too: an mpirun typed there beside a running job must not start a second launcher
  // (its coordinator's port, its report.json).
  if (command == "run" || command == "check" || command == "shell")
    setenv(std::string(contract::kLauncherPid).c_str(), std::to_string(getpid()).c_str(), 1);
  if (command == "run") return run_job(options, params.rest());
  if (command == "check") return check_job(options);
  if (command == "hosts") return hosts(options);
  if (command == "shell") return shell(options);
  return make_error(Exit::kUsage, "unknown subcommand '{}'; one of run, check, hosts, shell, convert, rank",
                    command);
}

}  // namespace

}  // namespace tmpi::launch

int main(int argc, char** argv) {
  return tmpi::cli::run("mpi-launcher", argc, argv, tmpi::launch::run);
}

// mpi-init: the launcher pod's init container (and, with --role node, the node pods').
//
// Launcher role: topology from one source -> /etc/mpi/{hostfile, hostfile.hydra,
// hostfile.deepspeed, hosts.json, discover_hosts.sh}; then the job's SSH identity.
// Node role: the SSH identity only, from the Secret: the job key, which mpi-sshd reads, and
// with --ssh-server openssh authorized_keys and sshd_config too.
// Both roles, for OpenSSH's sshd: the running uid's account (account.h: nss_wrapper's passwd
// and group, when NSS_WRAPPER_PASSWD is set), checked before anything else.
// Everything is computed and checked before the first file is written, and every write is
// atomic, so bad input never leaves a half-written output behind.
#include <unistd.h>

#include <iostream>

#include <spdlog/spdlog.h>

#include "common/cli.h"
#include "common/files.h"
#include "common/log.h"
#include "common/params.h"
#include "initcontainer/account.h"
#include "initcontainer/api_source.h"
#include "initcontainer/role.h"
#include "initcontainer/sources.h"
#include "initcontainer/ssh_identity.h"

namespace tmpi::init {

namespace {

constexpr const char* kSynopsis =
    "mpi-init --jobset NAME | --pods FILE | --hostfile FILE | --jobset NAME --replicated-jobs LIST "
    "[options]\n"
    "       mpi-init --role node [--ssh-secret DIR] [options]";

Expected<SourceOptions> source_options(const Params& params) {
  SourceOptions options;
  options.jobset = params.str(param::kJobset);
  options.subdomain = params.str(param::kSubdomain);
  options.launcher_job = params.str(param::kLauncherJob);
  options.launcher_as_node = params.flag(param::kLauncherAsNode);
  if (params.is_set(param::kSlots)) {
    if (params.integer(param::kSlots) < 1) {
      return make_error(Exit::kUsage, "--slots {}: slots must be 1 or more ({})", params.text(param::kSlots),
                        env_name(param::kSlots.name));
    }
    options.slots = static_cast<int>(params.integer(param::kSlots));
  }
  return options;
}

bool uses_api(const Params& params) {
  return params.is_set(param::kJobset) && !params.is_set(param::kPods) && !params.is_set(param::kHostfile) &&
         !params.is_set(param::kReplicatedJobs);
}

Expected<Topology> load_topology(const Params& params) {
  TMPI_ASSIGN(SourceOptions options, source_options(params));
  int sources = int(params.is_set(param::kPods)) + int(params.is_set(param::kHostfile)) +
                int(params.is_set(param::kReplicatedJobs));
  if (sources > 1) {
    return make_error(Exit::kUsage, "give one topology source: --pods, --hostfile or --replicated-jobs");
  }
  if (params.is_set(param::kPods)) {
    // Read straight into a padded buffer, parsed in place (simdjson reads past the end).
    TMPI_ASSIGN(PaddedText file, PaddedText::read(params.str(param::kPods)));
    return topology_from_pod_list(file, params.str(param::kPods), options);
  }
  if (params.is_set(param::kHostfile)) {
    TMPI_ASSIGN(MappedFile file, MappedFile::open(params.str(param::kHostfile)));
    return topology_from_hostfile(file.text(), params.str(param::kHostfile), options);
  }
  if (params.is_set(param::kReplicatedJobs))
    return topology_from_static(params.list(param::kReplicatedJobs), options);
  return make_error(Exit::kUsage,
                    "no topology source: pass --jobset NAME (the Kubernetes API), --pods FILE, "
                    "--hostfile FILE, or --jobset NAME --replicated-jobs launcher=1,node=N");
}

Expected<KeyPair> load_key(const Params& params) {
  if (params.is_set(param::kSshSecret)) return key_pair_from_secret_dir(params.str(param::kSshSecret));
  if (auto existing = key_pair_from_ssh_dir(params.str(param::kSshDir)); existing) {
    spdlog::info("reusing the job key already in {}", params.str(param::kSshDir));
    return existing;
  }
  spdlog::info("no --ssh-secret: generating a new Ed25519 job key");
  return generate_ed25519();
}

void log_account(const Account& account) {
  for (const auto& note : account.notes) spdlog::info("{}", note);
  for (const auto& warning : account.warnings) spdlog::warn("{}", warning);
  if (account.nss)
    spdlog::info("nss_wrapper files: {}, {}", account.nss->passwd_path, account.nss->group_path);
}

struct Loaded {
  Topology topology;
  KeyPair key;
};

// The Kubernetes API source: the JobSet, its pods (waited for) and its Secret, all under
// one deadline (--wait-timeout).
Expected<Loaded> load_from_api(const Params& params) {
  TMPI_ASSIGN(SourceOptions options, source_options(params));
  TMPI_ASSIGN(KubeConfig config,
              load_kube_config(current_environment(), params.str(param::kServiceAccountDir),
                               params.str(param::kNamespace)));
  KubeClient client(config, params.duration(param::kApiRequestTimeout));
  Deadline deadline(params.duration(param::kWaitTimeout));
  TMPI_ASSIGN(JobSetInfo jobset, get_jobset(client, options.jobset, deadline));
  if (params.is_set(param::kExpectedPods))
    jobset.expected_pods = static_cast<int>(params.integer(param::kExpectedPods));
  spdlog::info("JobSet {}/{}: waiting for {} pods ({})", config.namespace_, jobset.name, jobset.expected_pods,
               config.origin);
  WaitOptions wait;
  wait.page_size = static_cast<int>(params.integer(param::kApiPageSize));
  Loaded loaded;
  TMPI_ASSIGN(loaded.topology, wait_for_pods(client, options, jobset, wait, deadline));
  if (params.is_set(param::kSshSecret)) {
    TMPI_ASSIGN(loaded.key, key_pair_from_secret_dir(params.str(param::kSshSecret)));
  } else {
    TMPI_ASSIGN(loaded.key, ensure_job_secret(client, jobset, deadline));
  }
  return loaded;
}

// Every file is rendered before the first is written: a topology that cannot be rendered
// leaves no half-written set behind (each write is atomic on its own).
Status write_topology(const Topology& topology, const std::string& out) {
  TMPI_CHECK(validate_topology(topology, "the topology"));
  struct Output {
    std::string name, text;
    mode_t mode = 0644;
  };
  std::vector<Output> outputs = {{"hostfile", render_hostfile(topology, Dialect::kOpenMpi)},
                                 {"hostfile.hydra", render_hostfile(topology, Dialect::kHydra)},
                                 {"hostfile.deepspeed", render_hostfile(topology, Dialect::kDeepSpeed)},
                                 {"hosts.json", render_hosts_json(topology)},
                                 {"discover_hosts.sh", render_discover_hosts(topology), 0755}};
  // Only a missing folder is made (and chmodded): an emptyDir is root-owned, and a non-root
  // uid may write in it but not chmod it.
  if (!file_exists(out)) TMPI_CHECK(make_dirs(out, 0755));
  for (const auto& output : outputs)
    TMPI_CHECK(write_atomic(out + "/" + output.name, output.text, {output.mode}));
  return ok_status();
}

Status run(const std::vector<std::string>& args) {
  TMPI_ASSIGN(Params params, Params::parse(kScopeInit, args, current_environment()));
  if (params.help_requested()) {
    std::cout << help_text(kSynopsis, kScopeInit);
    return ok_status();
  }
  TMPI_CHECK(log::setup_from("mpi-init", params));
  SshServer server = params.choice(param::kSshServer, kSshServerSpellings);
  TMPI_ASSIGN(Account account, prepare_account(current_environment(), getuid(), getgid(), server));
  SshLayout layout{params.str(param::kSshDir),
                   static_cast<int>(params.integer(param::kSshPort)),
                   account.home,
                   account.session_env,
                   std::nullopt,
                   server == SshServer::kOpenSsh};

  if (params.choice(param::kRole, kRoleSpellings) == Role::kNode) {
    TMPI_ASSIGN(KeyPair key, load_key(params));
    TMPI_CHECK(install_account(account));
    log_account(account);
    TMPI_CHECK(install_identity(key, layout, nullptr));
    if (server == SshServer::kOpenSsh) {
      spdlog::info("node identity in {} ({}); start sshd with: sshd -D -f {}/sshd_config", layout.ssh_dir,
                   key.file_name, layout.ssh_dir);
    } else {
      spdlog::info("node identity in {} ({}); start the server with: mpi-sshd", layout.ssh_dir,
                   key.file_name);
    }
    return ok_status();
  }

  Loaded loaded;
  if (uses_api(params)) {
    TMPI_ASSIGN(loaded, load_from_api(params));
  } else {
    TMPI_ASSIGN(loaded.topology, load_topology(params));
    TMPI_ASSIGN(loaded.key, load_key(params));
  }
  const Topology& topology = loaded.topology;
  const KeyPair& key = loaded.key;
  for (const auto& note : topology.notes) spdlog::info("{}", note);
  if (auto idle = slots_below_gpus(topology)) spdlog::warn("{}", *idle);
  TMPI_CHECK(check_ssh_dir(layout, key));  // before the first write: all of the outputs, or none
  TMPI_CHECK(install_account(account));
  log_account(account);
  TMPI_CHECK(write_topology(topology, params.str(param::kOut)));
  TMPI_CHECK(install_identity(key, layout, &topology));
  spdlog::info("{} hosts, {} slots -> {}/hostfile, hosts.json; identity {} in {}", topology.hosts.size(),
               topology.total_slots(), params.str(param::kOut), key.file_name, layout.ssh_dir);
  return ok_status();
}

}  // namespace

}  // namespace tmpi::init

int main(int argc, char** argv) {
  return tmpi::cli::run("mpi-init", argc, argv, tmpi::init::run);
}

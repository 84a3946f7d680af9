// See options.h. The one place where the launcher's parameters become its options: each
// value was checked and parsed by Params::parse, so this only copies typed values.
#include "launcher/options.h"

#include <fmt/format.h>

#include "launcher/mpirun_line.h"

namespace tmpi::launch {

namespace {

// nccl-check's own settings that the user gave the launcher, passed on as "--name value";
// what was not set keeps nccl-check's default, which may depend on its backend.
std::vector<std::string> nccl_check_flags(const Params& params) {
  std::vector<std::string> flags;
  const ParamRef passed_on[] = {param::kMinBytes,  param::kMaxBytes,    param::kStepFactor,
                                param::kPairBytes, param::kIters,       param::kWarmup,
                                param::kMinBusbw,  param::kMinFraction, param::kStepTimeout,
                                param::kLogLevel,  param::kNcclLibrary};
  for (const ParamRef& handle : passed_on) {
    if (!params.is_set(handle)) continue;
    flags.push_back(fmt::format("--{}", handle.name));
    flags.push_back(params.text(handle));
  }
  return flags;
}

}  // namespace

LauncherOptions launcher_options(const Params& params) {
  LauncherOptions options;
  JobOptions& job = options.job;
  job.hosts_file = params.str(param::kHosts);
  job.ssh_dir = params.str(param::kSshDir);
  job.ssh_dir_given = params.is_set(param::kSshDir);
  job.mpi = params.choice(param::kMpi, kMpiWantedSpellings);
  job.mpirun = params.str(param::kMpirun);
  job.np = params.is_set(param::kNp) ? static_cast<int>(params.integer(param::kNp)) : 0;
  job.ssh_port = static_cast<int>(params.integer(param::kSshPort));
  job.rendezvous_port = static_cast<int>(params.integer(param::kRendezvousPort));
  job.iface = params.str(param::kIface);
  job.master_addr = params.str(param::kMasterAddr);
  job.master_port = params.text(param::kMasterPort);
  job.log_level = params.str(param::kLogLevel);
  job.beat_interval = params.duration(param::kBeatInterval);
  job.lost_after = params.duration(param::kLostAfter);
  job.env = params.list(param::kEnv);
  job.env_prefixes = params.list(param::kEnvPrefix);
  job.placement = params.choice(param::kPlacement, kPlacementCheckSpellings);
  job.mpi_words = split_words(params.str(param::kMpiArg));
  job.mpirun_line = params.flag(param::kMpirunLine);

  options.wait = params.choice(param::kWait, kWaitForSpellings);
  options.rendezvous = {{params.duration(param::kRendezvousTimeout), params.duration(param::kBeatInterval),
                         params.duration(param::kLostAfter)},
                        params.str(param::kListenAddress),
                        job.rendezvous_port,
                        options.wait == WaitFor::kSidecar};
  options.status = {params.choice(param::kStatus, kStatusModeSpellings),
                    params.duration(param::kStatusInterval)};
  options.events = {params.choice(param::kEvents, kEventsModeSpellings),
                    params.str(param::kTrainjob),
                    params.str(param::kServiceAccountDir),
                    params.str(param::kNamespace),
                    params.duration(param::kApiRequestTimeout),
                    static_cast<int>(params.integer(param::kApiRelayPort)),
                    params.str(param::kSshDir)};
  options.fabric = {params.choice(param::kCheck, kFabricBackendSpellings), params.str(param::kNcclCheck),
                    nccl_check_flags(params), params.duration(param::kStepTimeout)};
  options.coordinator = params.str(param::kCoordinator);
  options.report = params.str(param::kReport);
  options.termination_log = params.str(param::kTerminationLog);
  options.preflight = params.flag(param::kPreflight);
  // --ssh-check beside: the ssh step runs beside the launch, the ranks held (run_steps.h); only
  // when the ssh step runs at all (--wait ssh has done it) and no other step of the preflight
  // is an MPI job that needs every sshd first (the fabric check).
  options.job.start_gate = options.preflight &&
                           params.choice(param::kSshCheck, kSshCheckWhenSpellings) == SshCheckWhen::kBeside &&
                           options.wait != WaitFor::kSsh && options.fabric.check == FabricBackend::kNone;
  options.job.gate_fail_open = params.flag(param::kGateFailOpen);
  options.dry_run = params.flag(param::kDryRun);
  options.grace = params.duration(param::kGrace);
  options.timeout = params.duration(param::kTimeout);
  options.restart.restarts = static_cast<int>(params.integer(param::kRestarts));
  options.restart.window = params.duration(param::kRestartWindow);
  return options;
}

WaitOptions wait_options(const LauncherOptions& options) {
  return {options.wait, options.rendezvous.times.deadline, options.job.ssh_port, options.job.rendezvous_port};
}

PreflightOptions preflight_options(const LauncherOptions& options) {
  return {options.wait == WaitFor::kSsh, options.job.ssh_port, options.fabric};
}

}  // namespace tmpi::launch

// The table of every setting of every trainer-mpi command (docs/design.md, Parameters). Add a
// handle to param_names.h and its row here, and it has a flag, a TMPI_ variable, --help text
// and a README row; nothing else to wire.
// Keep help to one line: it is printed by --help and copied into the README.
#include <array>

#include "common/params.h"

namespace tmpi {

namespace {

using namespace std::chrono_literals;

constexpr unsigned kEvery =
    kScopeInit | kScopeRendezvous | kScopeLauncher | kScopeCheck | kScopeSshd | kScopeRank;
constexpr unsigned kSsh = kScopeInit | kScopeRendezvous | kScopeLauncher | kScopeSshd;

constexpr std::array kTable = {
    // Shared by every command.
    row(param::kLogLevel, "LEVEL", "info", "how much to log", kEvery, "trace|debug|info|warn|error"),
    row(param::kLogFormat, "FORMAT", "text", "log as plain lines, or as JSON lines for a log pipeline",
        kEvery, "text|json"),
    row(param::kSshDir, "DIR", "$HOME/.ssh", "where the job's SSH identity, config and known_hosts live",
        kSsh | kScopeRank),
    ranged(row(param::kSshPort, "PORT", "2222", "the port of every pod's SSH server", kSsh), 1, 65535),

    // mpi-init: where the topology comes from (one source per run).
    row(param::kRole, "ROLE", "launcher", "launcher: topology and identity; node: the identity only",
        kScopeInit, "launcher|node"),
    row(param::kSshServer, "SERVER", "mpi-sshd",
        "the pods' SSH server: mpi-sshd (built in), or openssh (sshd: its config, nss_wrapper's files)",
        kScopeInit, "mpi-sshd|openssh"),
    row(param::kPods, "FILE", "", "topology from a pod list, as `kubectl get pods -o json` prints it",
        kScopeInit),
    row(param::kHostfile, "FILE", "",
        "topology from an existing Open MPI or hydra hostfile (/etc/mpi/hostfile)", kScopeInit),
    row(param::kJobset, "NAME", "",
        "the JobSet: alone, read it and its pods from the Kubernetes API; else a filter or a name",
        kScopeInit),
    row(param::kReplicatedJobs, "LIST", "",
        "static topology without API access: replicated jobs in order, e.g. launcher=1,node=4", kScopeInit),
    row(param::kSubdomain, "NAME", "", "the headless Service of a static spec; default: the JobSet name",
        kScopeInit),
    row(param::kLauncherJob, "NAME", "launcher", "the replicated job that holds the launcher pod",
        kScopeInit),
    row(param::kLauncherAsNode, "BOOL", "false",
        "the launcher is also a host that runs ranks (Trainer's runLauncherAsNode)", kScopeInit),
    ranged(row(param::kSlots, "N", "", "slots per host; default: each pod's nvidia.com/gpu limit, else 1",
               kScopeInit),
           1, 1048576),
    row(param::kOut, "DIR", "/etc/trainer-mpi",
        "where hostfiles, hosts.json and discover_hosts.sh are written", kScopeInit),
    row(param::kNamespace, "NS", "",
        "the JobSet's namespace; default: the pod's own, or the kubeconfig context's",
        kScopeInit | kScopeLauncher),
    ranged(row(param::kExpectedPods, "N", "",
               "how many pods to wait for (launcher included); default: from the JobSet", kScopeInit),
           1, 1048576),
    ranged(row(param::kWaitTimeout, "DURATION", "300s",
               "how long to wait for every pod to exist and have an IP", kScopeInit),
           1s, 24h),
    ranged(row(param::kApiRequestTimeout, "DURATION", "10s",
               "one Kubernetes API request; a stalled one is retried",
               kScopeInit | kScopeLauncher | kScopeRendezvous),
           100ms, 10min),
    ranged(row(param::kApiPageSize, "N", "500", "pods per page when listing (limit/continue)", kScopeInit), 1,
           100000),
    row(param::kServiceAccountDir, "DIR", "/var/run/secrets/kubernetes.io/serviceaccount",
        "the mounted service account (token, ca.crt, namespace)",
        kScopeInit | kScopeLauncher | kScopeRendezvous),
    row(param::kSshSecret, "DIR", "", "a mounted Trainer or mpi-operator SSH Secret to take the job key from",
        kScopeInit),

    // The rendezvous: the coordinator (in mpi-launcher, or `mpi-rendezvous serve`) and the sidecar.
    row(param::kHosts, "FILE", "/etc/trainer-mpi/hosts.json", "the topology mpi-init wrote",
        kScopeRendezvous | kScopeLauncher),
    ranged(row(param::kRendezvousPort, "PORT", "29410", "the coordinator's HTTP port (on the launcher)",
               kScopeRendezvous | kScopeLauncher),
           1, 65535),
    ranged(row(param::kRendezvousTimeout, "DURATION", "300s",
               "every host must be registered and ssh-ready by then", kScopeRendezvous | kScopeLauncher),
           1s, 24h),
    ranged(row(param::kBeatInterval, "DURATION", "5s", "how often sidecars and running ranks' agents beat",
               kScopeRendezvous | kScopeLauncher | kScopeRank),
           100ms, 10min),
    ranged(row(param::kLostAfter, "DURATION", "15s", "a host with no beat for this long is lost",
               kScopeRendezvous | kScopeLauncher | kScopeRank),
           500ms, 1h),
    row(param::kListenAddress, "IP", "::",
        "where the coordinator, the probe and mpi-sshd listen; `::` takes IPv4 and IPv6, and is 0.0.0.0 "
        "where "
        "the pod has no IPv6",
        kScopeRendezvous | kScopeLauncher | kScopeSshd),
    row(param::kHost, "NAME", "", "this pod's host name in hosts.json; default: hostname -f",
        kScopeRendezvous),
    row(param::kCoordinator, "HOST:PORT", "",
        "the coordinator; default: the launcher of hosts.json, on --rendezvous-port",
        kScopeRendezvous | kScopeLauncher | kScopeRank),
    ranged(row(param::kDeadline, "DURATION", "600s",
               "the sidecar gives up (exit 75) after this long without reaching the coordinator",
               kScopeRendezvous),
           1s, 24h),
    ranged(row(param::kProbePort, "PORT", "29411",
               "the sidecar's /readyz port, for the pod's readiness probe", kScopeRendezvous),
           1, 65535),
    // `mpi-rendezvous in-place-agent`: JobSet's in-place restart barrier (manifests/inplace-restart).
    row(param::kInPlaceJobset, "NAME", "", "in-place-agent: this pod's JobSet (its jobset-name label)",
        kScopeRendezvous),
    row(param::kInPlacePod, "NAME", "", "in-place-agent: this pod's name (metadata.name)", kScopeRendezvous),
    row(param::kInPlaceTokenDir, "DIR", "/var/run/secrets/trainer-mpi/in-place-agent",
        "in-place-agent: its projected token (token, ca.crt, namespace), mounted in its container only",
        kScopeRendezvous),
    ranged(row(param::kInPlacePoll, "DURATION", "2s", "in-place-agent: how often it reads its JobSet",
               kScopeRendezvous),
           100ms, 10min),
    ranged(row(param::kBarrierPort, "PORT", "29413",
               "in-place-agent: the port of /barrier-is-down, for its startup probe", kScopeRendezvous),
           1, 65535),
    ranged(
        row(param::kApiRelayPort, "PORT", "29412",
            "the API relay on the launcher pod's loopback: its sidecar sends the launcher's Events with the "
            "token that it alone holds; 0: none",
            kScopeRendezvous | kScopeLauncher),
        0, 65535),

    // mpi-launcher.
    row(param::kWait, "MODE", "sidecar",
        "wait for every host: the sidecars' barrier, polling each sshd, or not at all", kScopeLauncher,
        "sidecar|ssh|none"),
    row(param::kPreflight, "BOOL", "true", "check DNS and ssh (and --placement probe) before the job",
        kScopeLauncher),
    row(param::kPlacement, "HOW", "agents",
        "check each rank's host: by its agent before it starts, also by a probe job in the preflight, or not",
        kScopeLauncher, "agents|probe|none"),
    row(param::kSshCheck, "WHEN", "beside",
        "the preflight's ssh step: beside the launch, the ranks held until it passes; or before the launch",
        kScopeLauncher, "beside|before"),
    row(param::kStartGate, "BOOL", "false",
        "the rank agent asks the launcher before it starts its rank (mpi-launcher sets it for its ranks)",
        kScopeLauncher | kScopeRank),
    row(param::kEpoch, "HEX", "",
        "the launch's random epoch, carried by the rank agent's requests (mpi-launcher sets it)",
        kScopeLauncher | kScopeRank),
    row(param::kGateFailOpen, "BOOL", "false",
        "start a rank whose start gate cannot be asked (no verified answer in --lost-after); else exit 75",
        kScopeLauncher | kScopeRank),
    row(param::kCheck, "KIND", "none", "the fabric check after the preflight (nccl-check)", kScopeLauncher,
        "none|mpi|nccl|auto"),
    row(param::kMpi, "FLAVOUR", "auto", "which MPI runs the job", kScopeLauncher, "auto|openmpi|mpich|intel"),
    row(param::kMpirun, "PATH", "", "the MPI launcher program; default: mpirun, or mpiexec.hydra for hydra",
        kScopeLauncher),
    ranged(row(param::kNp, "N", "", "how many ranks; default: the sum of the slots", kScopeLauncher), 1,
           16777216),
    row(param::kIface, "NAME", "", "the network interface MPI uses (passed on the command line)",
        kScopeLauncher),
    row(param::kEnv, "NAME", "", "forward this variable to every rank (repeatable)", kScopeLauncher),
    row(param::kEnvPrefix, "PREFIX", "", "forward every variable with this prefix (repeatable)",
        kScopeLauncher),
    ranged(row(param::kGrace, "DURATION", "10s", "from SIGTERM to SIGKILL when the job is stopped",
               kScopeLauncher),
           0ms, 1h),
    ranged(row(param::kTimeout, "DURATION", "0",
               "the job (from its launch) must end by then, else it is stopped with exit 75 and its running "
               "ranks "
               "named; 0 = no limit",
               kScopeLauncher),
           0ms, 720h),
    ranged(row(param::kRestarts, "N", "0",
               "restart the job in place after a fault of the infrastructure's (a lost host, a rank killed "
               "from outside, a failed fabric check), up to N times within --restart-window",
               kScopeLauncher),
           0, 100),
    ranged(row(param::kRestartWindow, "DURATION", "1h",
               "the window in which --restarts are counted; 0 = the job's whole life", kScopeLauncher),
           0ms, 720h),
    row(param::kRetryableExitCodes, "CODES", "",
        "the program's own exit codes that restart it in place too, e.g. 3,42 (with --restarts)",
        kScopeLauncher),
    row(param::kReport, "FILE", "/etc/trainer-mpi/report.json", "phases, hosts, ranks and the exit reason",
        kScopeLauncher),
    row(param::kTerminationLog, "FILE", "/dev/termination-log",
        "the job's verdict for `kubectl describe pod` (the kubelet's terminationMessagePath); written only "
        "where the file exists",
        kScopeLauncher),
    row(param::kDryRun, "BOOL", "false", "print the exact MPI command and exit", kScopeLauncher),
    row(param::kMpiArg, "WORD", "",
        "an mpirun option word for `run` (repeatable, one word each); the variable: words split at spaces",
        kScopeLauncher),
    row(param::kMpirunLine, "BOOL", "false",
        "the words after -- are a whole mpirun line (options, then the command), as the image's mpirun hands "
        "it on",
        kScopeLauncher),
    row(param::kStatus, "MODE", "auto",
        "TrainJob status (when Trainer sets KUBEFLOW_TRAINER_SERVER_URL): every phase, failures only, "
        "or none",
        kScopeLauncher, "auto|failures|off"),
    row(param::kEvents, "MODE", "auto",
        "Kubernetes Events on the TrainJob for failures, where RBAC allows (get trainjobs, create events)",
        kScopeLauncher, "auto|off"),
    row(param::kTrainjob, "NAME", "", "the TrainJob that Events are about; default: the JobSet's name",
        kScopeLauncher | kScopeRendezvous),
    ranged(row(param::kStatusInterval, "DURATION", "5s", "at most one TrainJob status update this often",
               kScopeLauncher),
           100ms, 1h),
    row(param::kMasterAddr, "HOST", "", "MASTER_ADDR for torch; default: the first host",
        kScopeLauncher | kScopeRank),
    ranged(row(param::kMasterPort, "PORT", "29500", "MASTER_PORT for torch", kScopeLauncher | kScopeRank), 1,
           65535),
    row(param::kNcclCheck, "PATH", "",
        "the nccl-check program for --check; default: nccl-check beside mpi-launcher, else on PATH",
        kScopeLauncher),
    row(param::kRuntime, "NAME", "",
        "convert: the TrainJob's runtimeRef; default: the package's runtime for the MPIJob's "
        "mpiImplementation",
        kScopeConvert),
    row(param::kOutput, "FILE", "", "convert: write the TrainJob there (atomically); default: stdout",
        kScopeConvert),

    // nccl-check (the launcher passes the shared ones on to it for --check).
    row(param::kBackend, "KIND", "mpi", "all-reduce with NCCL on GPUs, or with MPI on CPUs", kScopeCheck,
        "mpi|nccl"),
    row(param::kMinBytes, "SIZE", "1M", "the smallest all-reduce (nccl-tests -b)",
        kScopeCheck | kScopeLauncher),
    row(param::kMaxBytes, "SIZE", "",
        "the largest all-reduce (nccl-tests -e); default: 256M with --backend nccl, 64M with mpi",
        kScopeCheck | kScopeLauncher),
    ranged(row(param::kStepFactor, "N", "4", "each size is this many times the last (nccl-tests -f)",
               kScopeCheck | kScopeLauncher),
           2, 1024),
    row(param::kPairBytes, "SIZE", "64M", "the message of each per-node and per-pair test",
        kScopeCheck | kScopeLauncher),
    ranged(
        row(param::kIters, "N", "20", "timed iterations per size or pair test", kScopeCheck | kScopeLauncher),
        1, 1000000),
    ranged(row(param::kWarmup, "N", "5", "untimed iterations before them", kScopeCheck | kScopeLauncher), 0,
           1000000),
    row(param::kMinBusbw, "GBPS", "0",
        "a host, GPU or link below this bus bandwidth (GB/s) fails; 0 = no absolute floor",
        kScopeCheck | kScopeLauncher),
    row(param::kMinFraction, "X", "0.5", "a host or link below this fraction of the median host fails",
        kScopeCheck | kScopeLauncher),
    ranged(row(param::kStepTimeout, "DURATION", "60s",
               "each step (init, one size, one round) must end by then, else the check ends (75: a host fell "
               "silent, 69: the fabric)",
               kScopeCheck | kScopeLauncher),
           1s, 1h),
    row(param::kNcclLibrary, "FILE", "",
        "the image's libnccl.so.2 for --backend nccl; default: searched in LD_LIBRARY_PATH, the loader's "
        "cache, $CUDA_HOME/lib64 and /usr/local/cuda/lib64",
        kScopeCheck | kScopeLauncher),
    row(param::kJson, "FILE", "", "write the JSON report there (rank 0); - prints it as the last line",
        kScopeCheck),

    // mpi-sshd, the node's own SSH server (nodessh/session_rules.h says why each bound).
    ranged(row(param::kSshdMaxConnections, "N", "256",
               "logged-in connections served at once; one more is closed at accept", kScopeSshd),
           1, 4096),
    ranged(row(param::kSshdMaxStartups, "N", "64",
               "connections not logged in yet, in all; when full, the oldest idle one goes for a new one",
               kScopeSshd),
           1, 1024),
    ranged(row(param::kSshdPerSourceStartups, "N", "8",
               "connections not logged in yet from one address; one more is closed at accept", kScopeSshd),
           1, 1024),
    ranged(row(param::kSshdLoginGrace, "DURATION", "20s", "a connection not logged in by then is closed",
               kScopeSshd),
           1s, 10min),
    ranged(row(param::kSshdAuthTries, "N", "6",
               "keys refused before a connection is closed (sshd's MaxAuthTries)", kScopeSshd),
           1, 100),
    row(param::kSshdAcceptEnv, "LIST", "LANG,LC_*,COLORTERM,NO_COLOR",
        "env requests taken into a command's environment: names, * and ? (sshd's AcceptEnv)", kScopeSshd),
    ranged(row(param::kSshdHangupGrace, "DURATION", "2s",
               "after the client goes, SIGHUP to the command's group, then SIGKILL once this has passed",
               kScopeSshd),
           100ms, 1min),
};

// One row per handle, at the handle's own place: a parameter named in param_names.h and
// missing here, or listed twice, does not compile.
constexpr bool every_handle_has_its_row() {
  if (kTable.size() != kParamCount) return false;
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (kTable[i].index != i) return false;
  }
  return true;
}
static_assert(every_handle_has_its_row(),
              "param_table.cpp: one row per handle of param_names.h, in its order");

// A duration with no range would take 0 where 0 means back to back, or a number of hours
// that overflows the clock: every one is ranged().
constexpr bool every_duration_has_its_range() {
  for (const ParamSpec& spec : kTable) {
    if (spec.type == ParamType::kDuration && spec.min == std::numeric_limits<long long>::min()) return false;
  }
  return true;
}
static_assert(every_duration_has_its_range(), "param_table.cpp: give every DURATION row a ranged() bound");

}  // namespace

std::span<const ParamSpec> param_table() {
  return kTable;
}

}  // namespace tmpi

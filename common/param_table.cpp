// The table of every setting of every trainer-mpi command (docs/design.md, Parameters). Add a row here and
// it has a flag, a TMPI_ variable, --help text and a README row; nothing else to wire.
// Keep help to one line: it is printed by --help and copied into the README.
#include <array>

#include "common/params.h"

namespace tmpi {

namespace {

constexpr unsigned kEvery = kScopeInit | kScopeRendezvous | kScopeLauncher | kScopeCheck;
constexpr unsigned kSsh = kScopeInit | kScopeRendezvous | kScopeLauncher;
using T = ParamType;

constexpr std::array kTable = {
    // Shared by every command.
    ParamSpec{"log-level", "LEVEL", T::kChoice, "info", "how much to log", kEvery,
              "trace|debug|info|warn|error"},
    ParamSpec{"log-format", "FORMAT", T::kChoice, "text",
              "log as plain lines, or as JSON lines for a log pipeline", kEvery, "text|json"},
    ParamSpec{"ssh-dir", "DIR", T::kPath, "$HOME/.ssh",
              "where the job's SSH identity, config and known_hosts live", kSsh},
    ranged(ParamSpec{"ssh-port", "PORT", T::kInt, "2222", "the port every pod's sshd listens on", kSsh}, 1,
           65535),

    // mpi-init: where the topology comes from (one source per run).
    ParamSpec{"role", "ROLE", T::kChoice, "launcher",
              "launcher: topology and identity; node: identity and sshd config only", kScopeInit,
              "launcher|node"},
    ParamSpec{"pods", "FILE", T::kPath, "",
              "topology from a pod list, as `kubectl get pods -o json` prints it", kScopeInit},
    ParamSpec{"hostfile", "FILE", T::kPath, "",
              "topology from an existing Open MPI or hydra hostfile (/etc/mpi/hostfile)", kScopeInit},
    ParamSpec{"jobset", "NAME", T::kString, "",
              "the JobSet: alone, read it and its pods from the Kubernetes API; else a filter or a name",
              kScopeInit},
    ParamSpec{"replicated-jobs", "LIST", T::kList, "",
              "static topology without API access: replicated jobs in order, e.g. launcher=1,node=4",
              kScopeInit},
    ParamSpec{"subdomain", "NAME", T::kString, "",
              "the headless Service of a static spec; default: the JobSet name", kScopeInit},
    ParamSpec{"launcher-job", "NAME", T::kString, "launcher",
              "the replicated job that holds the launcher pod", kScopeInit},
    ParamSpec{"launcher-as-node", "BOOL", T::kBool, "false",
              "the launcher is also a host that runs ranks (Trainer's runLauncherAsNode)", kScopeInit},
    ranged(ParamSpec{"slots", "N", T::kInt, "",
                     "slots per host; default: each pod's nvidia.com/gpu limit, else 1", kScopeInit},
           1, 1048576),
    ParamSpec{"out", "DIR", T::kPath, "/etc/mpi",
              "where hostfiles, hosts.json and discover_hosts.sh are written", kScopeInit},
    ParamSpec{"namespace", "NS", T::kString, "",
              "the JobSet's namespace; default: the pod's own, or the kubeconfig context's",
              kScopeInit | kScopeLauncher},
    ranged(ParamSpec{"expected-pods", "N", T::kInt, "",
                     "how many pods to wait for (launcher included); default: from the JobSet", kScopeInit},
           1, 1048576),
    ParamSpec{"wait-timeout", "DURATION", T::kDuration, "300s",
              "how long to wait for every pod to exist and have an IP", kScopeInit},
    ParamSpec{"api-request-timeout", "DURATION", T::kDuration, "10s",
              "one Kubernetes API request; a stalled one is retried", kScopeInit | kScopeLauncher},
    ranged(ParamSpec{"api-page-size", "N", T::kInt, "500", "pods per page when listing (limit/continue)",
                     kScopeInit},
           1, 100000),
    ParamSpec{"service-account-dir", "DIR", T::kPath, "/var/run/secrets/kubernetes.io/serviceaccount",
              "the mounted service account (token, ca.crt, namespace)", kScopeInit | kScopeLauncher},
    ParamSpec{"ssh-secret", "DIR", T::kPath, "",
              "a mounted Trainer or mpi-operator SSH Secret to take the job key from", kScopeInit},

    // The rendezvous: the coordinator (in mpi-launcher, or `mpi-rendezvous serve`) and the sidecar.
    ParamSpec{"hosts", "FILE", T::kPath, "/etc/mpi/hosts.json", "the topology mpi-init wrote",
              kScopeRendezvous | kScopeLauncher},
    ranged(ParamSpec{"rendezvous-port", "PORT", T::kInt, "29410",
                     "the coordinator's HTTP port (on the launcher)", kScopeRendezvous | kScopeLauncher},
           1, 65535),
    ParamSpec{"rendezvous-timeout", "DURATION", T::kDuration, "300s",
              "every host must be registered and ssh-ready by then", kScopeRendezvous | kScopeLauncher},
    ParamSpec{"beat-interval", "DURATION", T::kDuration, "5s",
              "how often sidecars and running ranks' agents beat", kScopeRendezvous | kScopeLauncher},
    ParamSpec{"lost-after", "DURATION", T::kDuration, "15s", "a host with no beat for this long is lost",
              kScopeRendezvous | kScopeLauncher},
    ParamSpec{"listen-address", "IP", T::kString, "0.0.0.0", "where the coordinator and the probe listen",
              kScopeRendezvous | kScopeLauncher},
    ParamSpec{"host", "NAME", T::kString, "", "this pod's host name in hosts.json; default: hostname -f",
              kScopeRendezvous},
    ParamSpec{"coordinator", "HOST:PORT", T::kString, "",
              "the coordinator; default: the launcher of hosts.json, on --rendezvous-port",
              kScopeRendezvous | kScopeLauncher},
    ParamSpec{"deadline", "DURATION", T::kDuration, "600s",
              "the sidecar gives up (exit 75) after this long without reaching the coordinator",
              kScopeRendezvous},
    ranged(ParamSpec{"probe-port", "PORT", T::kInt, "29411",
                     "the sidecar's /readyz port, for the pod's readiness probe", kScopeRendezvous},
           1, 65535),

    // mpi-launcher.
    ParamSpec{"wait", "MODE", T::kChoice, "sidecar",
              "wait for every host: the sidecars' barrier, polling each sshd, or not at all", kScopeLauncher,
              "sidecar|ssh|none"},
    ParamSpec{"preflight", "BOOL", T::kBool, "true", "check DNS, ssh and rank placement before the job",
              kScopeLauncher},
    ParamSpec{"check", "KIND", T::kChoice, "none", "the fabric check after the preflight (nccl-check)",
              kScopeLauncher, "none|mpi|nccl|auto"},
    ParamSpec{"mpi", "FLAVOUR", T::kChoice, "auto", "which MPI runs the job", kScopeLauncher,
              "auto|openmpi|mpich|intel"},
    ParamSpec{"mpirun", "PATH", T::kPath, "",
              "the MPI launcher program; default: mpirun, or mpiexec.hydra for hydra", kScopeLauncher},
    ranged(ParamSpec{"np", "N", T::kInt, "", "how many ranks; default: the sum of the slots", kScopeLauncher},
           1, 16777216),
    ParamSpec{"iface", "NAME", T::kString, "", "the network interface MPI uses (passed on the command line)",
              kScopeLauncher},
    ParamSpec{"env", "NAME", T::kList, "", "forward this variable to every rank (repeatable)",
              kScopeLauncher},
    ParamSpec{"env-prefix", "PREFIX", T::kList, "", "forward every variable with this prefix (repeatable)",
              kScopeLauncher},
    ParamSpec{"grace", "DURATION", T::kDuration, "10s", "from SIGTERM to SIGKILL when the job is stopped",
              kScopeLauncher},
    ParamSpec{
        "timeout", "DURATION", T::kDuration, "0",
        "the job (from its launch) must end by then, else it is stopped with exit 75 and its running ranks "
        "named; 0 = no limit",
        kScopeLauncher},
    ParamSpec{"report", "FILE", T::kPath, "/etc/mpi/report.json", "phases, hosts, ranks and the exit reason",
              kScopeLauncher},
    ParamSpec{"dry-run", "BOOL", T::kBool, "false", "print the exact MPI command and exit", kScopeLauncher},
    ParamSpec{"status", "MODE", T::kChoice, "auto",
              "TrainJob status (when Trainer sets KUBEFLOW_TRAINER_SERVER_URL): every phase, failures only, "
              "or none",
              kScopeLauncher, "auto|failures|off"},
    ParamSpec{
        "events", "MODE", T::kChoice, "auto",
        "Kubernetes Events on the TrainJob for failures, where RBAC allows (get trainjobs, create events)",
        kScopeLauncher, "auto|off"},
    ParamSpec{"trainjob", "NAME", T::kString, "",
              "the TrainJob that Events are about; default: the JobSet's name", kScopeLauncher},
    ParamSpec{"status-interval", "DURATION", T::kDuration, "5s",
              "at most one TrainJob status update this often", kScopeLauncher},
    ParamSpec{"master-addr", "HOST", T::kString, "", "MASTER_ADDR for torch; default: the first host",
              kScopeLauncher},
    ranged(ParamSpec{"master-port", "PORT", T::kInt, "29500", "MASTER_PORT for torch", kScopeLauncher}, 1,
           65535),
    ParamSpec{"nccl-check", "PATH", T::kPath, "",
              "the nccl-check program for --check; default: nccl-check beside mpi-launcher, else on PATH",
              kScopeLauncher},

    // nccl-check (the launcher passes the shared ones on to it for --check).
    ParamSpec{"backend", "KIND", T::kChoice, "mpi", "all-reduce with NCCL on GPUs, or with MPI on CPUs",
              kScopeCheck, "mpi|nccl"},
    ParamSpec{"min-bytes", "SIZE", T::kBytes, "1M", "the smallest all-reduce (nccl-tests -b)",
              kScopeCheck | kScopeLauncher},
    ParamSpec{"max-bytes", "SIZE", T::kBytes, "",
              "the largest all-reduce (nccl-tests -e); default: 256M with --backend nccl, 64M with mpi",
              kScopeCheck | kScopeLauncher},
    ranged(ParamSpec{"step-factor", "N", T::kInt, "4",
                     "each size is this many times the last (nccl-tests -f)", kScopeCheck | kScopeLauncher},
           2, 1024),
    ParamSpec{"pair-bytes", "SIZE", T::kBytes, "64M", "the message of each per-node and per-pair test",
              kScopeCheck | kScopeLauncher},
    ranged(ParamSpec{"iters", "N", T::kInt, "20", "timed iterations per size or pair test",
                     kScopeCheck | kScopeLauncher},
           1, 1000000),
    ranged(ParamSpec{"warmup", "N", T::kInt, "5", "untimed iterations before them",
                     kScopeCheck | kScopeLauncher},
           0, 1000000),
    ParamSpec{"min-busbw", "GBPS", T::kNumber, "0",
              "a host, GPU or link below this bus bandwidth (GB/s) fails; 0 = no absolute floor",
              kScopeCheck | kScopeLauncher},
    ParamSpec{"min-fraction", "X", T::kNumber, "0.5",
              "a host or link below this fraction of the median host fails", kScopeCheck | kScopeLauncher},
    ParamSpec{"step-timeout", "DURATION", T::kDuration, "60s",
              "each step (init, one size, one round) must end by then, else exit 75",
              kScopeCheck | kScopeLauncher},
    ParamSpec{"json", "FILE", T::kPath, "",
              "write the JSON report there (rank 0); - prints it as the last line", kScopeCheck},
};

}  // namespace

std::span<const ParamSpec> param_table() {
  return kTable;
}

}  // namespace tmpi

// The names of every parameter, as typed handles (docs/design.md, Parameters). NCCL's
// NCCL_PARAM is the anchor: a parameter is read through a compile-time constant that
// carries its name and its type, never through a string, so a misspelt name does not
// compile and an integer cannot be read as a duration. The rows of param_table.cpp are
// built from these handles (one spelling of each name), and a static check there proves
// that the table has exactly one row per handle, in this order.
//
// Add a parameter: one line here, one row in param_table.cpp.
#pragma once

#include <cstddef>
#include <string_view>

namespace tmpi {

// kNumber: a decimal (0.5, 12.5); kBytes: a size with an optional K, M or G suffix (powers
// of 1024, as nccl-tests reads -b and -e).
enum class ParamType { kString, kPath, kInt, kNumber, kBytes, kDuration, kBool, kChoice, kList };

// X(handle, name, type): the flag is --name, the variable TMPI_NAME.
#define TMPI_PARAMETERS(X)                                    \
  X(kLogLevel, "log-level", kChoice)                          \
  X(kLogFormat, "log-format", kChoice)                        \
  X(kSshDir, "ssh-dir", kPath)                                \
  X(kSshPort, "ssh-port", kInt)                               \
  X(kRole, "role", kChoice)                                   \
  X(kSshServer, "ssh-server", kChoice)                        \
  X(kPods, "pods", kPath)                                     \
  X(kHostfile, "hostfile", kPath)                             \
  X(kJobset, "jobset", kString)                               \
  X(kReplicatedJobs, "replicated-jobs", kList)                \
  X(kSubdomain, "subdomain", kString)                         \
  X(kLauncherJob, "launcher-job", kString)                    \
  X(kLauncherAsNode, "launcher-as-node", kBool)               \
  X(kSlots, "slots", kInt)                                    \
  X(kOut, "out", kPath)                                       \
  X(kNamespace, "namespace", kString)                         \
  X(kExpectedPods, "expected-pods", kInt)                     \
  X(kWaitTimeout, "wait-timeout", kDuration)                  \
  X(kApiRequestTimeout, "api-request-timeout", kDuration)     \
  X(kApiPageSize, "api-page-size", kInt)                      \
  X(kServiceAccountDir, "service-account-dir", kPath)         \
  X(kSshSecret, "ssh-secret", kPath)                          \
  X(kHosts, "hosts", kPath)                                   \
  X(kRendezvousPort, "rendezvous-port", kInt)                 \
  X(kRendezvousTimeout, "rendezvous-timeout", kDuration)      \
  X(kBeatInterval, "beat-interval", kDuration)                \
  X(kLostAfter, "lost-after", kDuration)                      \
  X(kListenAddress, "listen-address", kString)                \
  X(kHost, "host", kString)                                   \
  X(kCoordinator, "coordinator", kString)                     \
  X(kDeadline, "deadline", kDuration)                         \
  X(kProbePort, "probe-port", kInt)                           \
  X(kInPlaceJobset, "in-place-jobset", kString)               \
  X(kInPlacePod, "in-place-pod", kString)                     \
  X(kInPlaceTokenDir, "in-place-token-dir", kPath)            \
  X(kInPlacePoll, "in-place-poll", kDuration)                 \
  X(kBarrierPort, "barrier-port", kInt)                       \
  X(kApiRelayPort, "api-relay-port", kInt)                    \
  X(kWait, "wait", kChoice)                                   \
  X(kPreflight, "preflight", kBool)                           \
  X(kPlacement, "placement", kChoice)                         \
  X(kSshCheck, "ssh-check", kChoice)                          \
  X(kStartGate, "start-gate", kBool)                          \
  X(kEpoch, "epoch", kString)                                 \
  X(kGateFailOpen, "gate-fail-open", kBool)                   \
  X(kCheck, "check", kChoice)                                 \
  X(kMpi, "mpi", kChoice)                                     \
  X(kMpirun, "mpirun", kPath)                                 \
  X(kNp, "np", kInt)                                          \
  X(kIface, "iface", kString)                                 \
  X(kEnv, "env", kList)                                       \
  X(kEnvPrefix, "env-prefix", kList)                          \
  X(kGrace, "grace", kDuration)                               \
  X(kTimeout, "timeout", kDuration)                           \
  X(kRestarts, "restarts", kInt)                              \
  X(kRestartWindow, "restart-window", kDuration)              \
  X(kRetryableExitCodes, "retryable-exit-codes", kList)       \
  X(kReport, "report", kPath)                                 \
  X(kTerminationLog, "termination-log", kPath)                \
  X(kDryRun, "dry-run", kBool)                                \
  X(kMpiArg, "mpi-arg", kString)                              \
  X(kMpirunLine, "mpirun-line", kBool)                        \
  X(kStatus, "status", kChoice)                               \
  X(kEvents, "events", kChoice)                               \
  X(kTrainjob, "trainjob", kString)                           \
  X(kStatusInterval, "status-interval", kDuration)            \
  X(kMasterAddr, "master-addr", kString)                      \
  X(kMasterPort, "master-port", kInt)                         \
  X(kNcclCheck, "nccl-check", kPath)                          \
  X(kRuntime, "runtime", kString)                             \
  X(kOutput, "output", kPath)                                 \
  X(kBackend, "backend", kChoice)                             \
  X(kMinBytes, "min-bytes", kBytes)                           \
  X(kMaxBytes, "max-bytes", kBytes)                           \
  X(kStepFactor, "step-factor", kInt)                         \
  X(kPairBytes, "pair-bytes", kBytes)                         \
  X(kIters, "iters", kInt)                                    \
  X(kWarmup, "warmup", kInt)                                  \
  X(kMinBusbw, "min-busbw", kNumber)                          \
  X(kMinFraction, "min-fraction", kNumber)                    \
  X(kStepTimeout, "step-timeout", kDuration)                  \
  X(kNcclLibrary, "nccl-library", kPath)                      \
  X(kJson, "json", kPath)                                     \
  X(kSshdMaxConnections, "sshd-max-connections", kInt)        \
  X(kSshdMaxStartups, "sshd-max-startups", kInt)              \
  X(kSshdPerSourceStartups, "sshd-per-source-startups", kInt) \
  X(kSshdLoginGrace, "sshd-login-grace", kDuration)           \
  X(kSshdAuthTries, "sshd-auth-tries", kInt)                  \
  X(kSshdAcceptEnv, "sshd-accept-env", kList)                 \
  X(kSshdHangupGrace, "sshd-hangup-grace", kDuration)

namespace param_detail {
enum Index : std::size_t {
#define TMPI_PARAM_INDEX(handle, name, type) handle,
  TMPI_PARAMETERS(TMPI_PARAM_INDEX)
#undef TMPI_PARAM_INDEX
      kCount
};
}  // namespace param_detail

inline constexpr std::size_t kParamCount = param_detail::kCount;

// Any parameter: its row in the table and its name. What is_set() and text() take.
struct ParamRef {
  std::size_t index;
  std::string_view name;
};

// A parameter of type T: each typed reader of Params takes only its own type.
template <ParamType T>
struct Param : ParamRef {
  static constexpr ParamType kType = T;
};

namespace param {
#define TMPI_PARAM_HANDLE(handle, name, type) \
  inline constexpr Param<ParamType::type> handle{{param_detail::handle, name}};
TMPI_PARAMETERS(TMPI_PARAM_HANDLE)
#undef TMPI_PARAM_HANDLE
}  // namespace param

}  // namespace tmpi

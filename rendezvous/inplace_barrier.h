// JobSet's in-place restart barrier, the agent's side, as a pure engine (no I/O): what the
// agent reads of its JobSet, and what it does on each reading. inplace_agent.* holds the
// polls and the writes around it. The rules are JobSet v0.12.0's own agent's
// (kubernetes-sigs/jobset f22e565a, cmd/in-place-restart-agent/main.go, Reconcile), in its
// order: a JobSet that bypasses the barrier lifts it at once and writes nothing; a process
// writes its attempt once (0 on a JobSet that never synced, else one past
// status.currentInPlaceRestartAttempt); it exits with the restart code when
// status.previousInPlaceRestartAttempt reaches its attempt, even after the barrier lifted;
// it lifts the barrier when status.currentInPlaceRestartAttempt equals its attempt.
// JobSet's controller moves those two fields from every pod's attempt annotation
// (pkg/controllers/in_place_restart.go); tests/fakes/fake_kube_api.py plays it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/error.h"

namespace tmpi::rdv::inplace {

// J:api/jobset/v1alpha2/jobset_types.go InPlaceRestartAttemptKey, DisableInPlaceRestartKey.
inline constexpr const char* kAttemptAnnotation = "jobset.sigs.k8s.io/in-place-restart-attempt";
inline constexpr const char* kDisableAnnotation = "jobset.sigs.k8s.io/disable-in-place-restart";
// The field manager of the annotation's server-side apply: JobSet's agent's, so that either
// agent may take the field over from the other (J:cmd/in-place-restart-agent/main.go).
inline constexpr const char* kFieldManager = "in-place-restart-agent";
// The largest JobSet answer read: a JobSet is a few KiB; its pod templates at most ~1 MiB (etcd).
inline constexpr std::size_t kMaxJobSetBytes = std::size_t{3} << 20;

// What the agent reads of its JobSet (GET jobsets/NAME).
struct JobSetView {
  bool bypass = false;  // the disable annotation, no failurePolicy, or another restartStrategy
  std::optional<std::int32_t> current;   // status.currentInPlaceRestartAttempt
  std::optional<std::int32_t> previous;  // status.previousInPlaceRestartAttempt
  std::string uid;                       // metadata.uid, to tell a JobSet made again under its name
};

// A JobSet answer, checked for shape: a JSON object of kind JobSet named `name`; the status
// fields absent, null, or integers 0..2^31-1 (the CRD's minimum 0 and int32), else an Error
// (Exit::kData) naming the field.
Expected<JobSetView> parse_jobset(const std::string& body, const std::string& name);

// The attempt a pod annotation holds (the controller's parse: a decimal, non-negative int32).
Expected<std::int32_t> parse_attempt(const std::string& text);

struct AgentState {
  std::optional<std::int32_t> attempt;  // written to the pod by this process (once)
  bool barrier_up = true;
};

enum class Step {
  kWrite,    // apply `attempt` to the pod's annotation, then decide again on the same view
  kLift,     // lift the barrier (for the life of this process)
  kRestart,  // exit with the restart code: the kubelet restarts this container
  kWait,     // nothing to do until the JobSet changes
  kFail,     // the attempt would pass int32 (JobSet's field): the `why` says so
};

struct Decision {
  Step step = Step::kWait;
  std::int32_t attempt = 0;  // kWrite: the attempt to write; else the agent's own
  std::string why;           // one line for the log
};

Decision decide(const AgentState& state, const JobSetView& jobset);

// The server-side apply body for the pod's annotation (apply-patch+yaml; JSON is YAML): the
// annotation alone, so the field manager owns nothing else of the pod.
std::string attempt_apply_body(const std::string& pod, const std::string& namespace_, std::int32_t attempt);

}  // namespace tmpi::rdv::inplace

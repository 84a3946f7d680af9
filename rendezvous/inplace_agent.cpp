// See inplace_agent.h. One loop: read the JobSet, decide (inplace_barrier.h), act, nap. A
// reading that fails is logged and retried at the next poll: the barrier holds meanwhile,
// and an agent that has lifted it keeps its pod running. The JobSet's uid is kept from the
// first reading: a JobSet deleted and made again under the name is another job's (its pods
// are this pod's successors), so this agent does nothing more for it.
#include "rendezvous/inplace_agent.h"

#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/http_client.h"

namespace tmpi::rdv::inplace {

namespace {

// J:cmd/in-place-restart-agent/main.go patchPodInPlaceRestartAttempt: a server-side apply.
constexpr const char* kApplyType = "application/apply-patch+yaml";

}  // namespace

Agent::Agent(AgentOptions options, KubeClient& kube, TimeSource& clock)
    : options_(std::move(options)), kube_(kube), clock_(clock) {}

void Agent::stop() {
  std::lock_guard lock(nap_mutex_);
  stop_ = true;
  clock_.notify_all(nap_cv_);
}

void Agent::nap(Millis length) {
  std::unique_lock lock(nap_mutex_);
  Clock::time_point until = clock_.now() + length;
  while (!stop_ && clock_.now() < until) clock_.wait_once(nap_cv_, lock, until);
}

Expected<std::optional<JobSetView>> Agent::read_jobset() {
  const std::string& ns = kube_.config().namespace_;
  std::string path = fmt::format("/apis/jobset.x-k8s.io/v1alpha2/namespaces/{}/jobsets/{}", url_encode(ns),
                                 url_encode(options_.jobset));
  TMPI_ASSIGN(KubeResponse answer, kube_.call("GET", path, "", {"get", "jobset.x-k8s.io", "jobsets"},
                                              Deadline(options_.call_budget, clock_)));
  if (answer.status == 404) return std::optional<JobSetView>{};  // deleted: this pod goes with it
  TMPI_ASSIGN(JobSetView view, parse_jobset(answer.body, options_.jobset));
  return std::optional<JobSetView>{std::move(view)};
}

Status Agent::write_attempt(std::int32_t attempt) {
  const std::string& ns = kube_.config().namespace_;
  std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}?fieldManager={}&force=true", url_encode(ns),
                                 url_encode(options_.pod), kFieldManager);
  TMPI_ASSIGN(KubeResponse answer,
              kube_.call("PATCH", path, attempt_apply_body(options_.pod, ns, attempt), {"patch", "", "pods"},
                         Deadline(options_.call_budget, clock_), kApplyType));
  if (answer.status < 200 || answer.status >= 300) {
    return make_error(Exit::kTempFail, "pod {}: the apply of {} answered HTTP {}", options_.pod,
                      kAttemptAnnotation, answer.status);
  }
  return ok_status();
}

Status Agent::run() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<long> jitter(0, options_.poll.count() / 4);
  std::string uid;
  spdlog::info("in-place agent for pod {} of JobSet {}: the barrier is up", options_.pod, options_.jobset);
  while (!stop_) {
    auto reading = read_jobset();
    // A refusal (the RBAC) or an answer of the wrong shape ends the agent only before its first
    // reading: a misconfiguration, shown at the pod's start. Afterwards an exit would cost the
    // container a restart (JobSet fails the JobSet past maxRestarts, in_place_restart.go) and
    // every pod an attempt, for what may be a RoleBinding applied again or a webhook's moment:
    // so it is logged and retried, the barrier as it was.
    const bool first_reading = uid.empty();
    if (!reading && first_reading &&
        (reading.error().exit == Exit::kNoPerm || reading.error().exit == Exit::kData)) {
      return reading.error();
    }
    if (!reading) spdlog::warn("in-place agent: {}", reading.error().message);
    if (reading && !*reading) spdlog::warn("in-place agent: JobSet {} is gone", options_.jobset);
    if (reading && *reading && uid.empty()) uid = (*reading)->uid;
    if (reading && *reading && (*reading)->uid != uid) {
      spdlog::warn("in-place agent: JobSet {} was made again (another uid); this pod is not its",
                   options_.jobset);
      reading = std::optional<JobSetView>{};
    }
    for (int steps = 0; reading && *reading && steps < 3; ++steps) {  // write, then decide once more
      Decision next = decide(state_, **reading);
      if (!next.why.empty()) spdlog::info("in-place agent: {}", next.why);
      if (next.step == Step::kFail) return make_error(Exit::kData, "in-place agent: {}", next.why);
      if (next.step == Step::kRestart) return make_error(kRestartExit, "in-place agent: {}", next.why);
      if (next.step == Step::kLift) {
        state_.barrier_up = false;
        barrier_down_ = true;
      }
      if (next.step != Step::kWrite) break;
      if (auto wrote = write_attempt(next.attempt); !wrote) {
        spdlog::warn("in-place agent: {}; retrying at the next poll", wrote.error().message);
        break;
      }
      state_.attempt = next.attempt;  // only once applied, as upstream's agent
    }
    nap(options_.poll + Millis(jitter(rng)));
  }
  return ok_status();
}

}  // namespace tmpi::rdv::inplace

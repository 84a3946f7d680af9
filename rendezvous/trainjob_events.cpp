// See trainjob_events.h.
#include "rendezvous/trainjob_events.h"

#include <unistd.h>

#include <ctime>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/json_fields.h"
#include "common/params.h"
#include "common/utf8.h"

namespace tmpi {

namespace {

constexpr std::size_t kMaxMessage = 1024;
constexpr Millis kEventBudget{5000};  // per event, retries included
const KubeAction kGetTrainJob{"get", "trainer.kubeflow.org", "trainjobs"};
const KubeAction kCreateEvent{"create", "", "events"};

std::string hostname() {
  char name[256] = {0};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "trainer-mpi";
}

// 401 and 403 are the Role's absence; KubeClient makes them Exit::kNoPerm errors.
bool refused(const Error& error) {
  return error.exit == Exit::kNoPerm;
}

}  // namespace

nlohmann::json event_body(const TrainJobRef& trainjob, const std::string& type, const std::string& reason,
                          const std::string& message, const std::string& instance,
                          std::chrono::system_clock::time_point now) {
  std::string text = truncate_utf8(message, kMaxMessage, "...");  // never in the middle of a character
  std::string when = rfc3339(now);
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"generateName", trainjob.name + "."}, {"namespace", trainjob.namespace_}}},
          {"involvedObject",
           {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
            {"kind", "TrainJob"},
            {"name", trainjob.name},
            {"namespace", trainjob.namespace_},
            {"uid", trainjob.uid}}},
          {"reason", reason},
          {"message", text},
          {"type", type},
          {"source", {{"component", "mpi-launcher"}, {"host", instance}}},
          {"firstTimestamp", when},
          {"lastTimestamp", when},
          {"count", 1},
          {"reportingComponent", "trainer-mpi/mpi-launcher"},
          {"reportingInstance", instance}};
}

TrainJobEvents::TrainJobEvents(KubeConfig config, Millis request_timeout, std::string trainjob,
                               std::string component)
    : client_(std::move(config), request_timeout), component_(std::move(component)) {
  trainjob_.name = std::move(trainjob);
  trainjob_.namespace_ = client_.config().namespace_;
}

EventSent TrainJobEvents::resolve() {
  if (!refusal_.empty()) return EventSent::kRefused;
  if (resolved_) return EventSent::kRecorded;
  Deadline deadline(kEventBudget);
  std::string path = fmt::format("/apis/trainer.kubeflow.org/v1alpha1/namespaces/{}/trainjobs/{}",
                                 trainjob_.namespace_, trainjob_.name);
  auto got = client_.call("GET", path, "", kGetTrainJob, deadline);
  if (got && got->status == 200) {
    trainjob_.uid = string_at(got->json(), "/metadata/uid");
    resolved_ = true;
    return EventSent::kRecorded;
  }
  if (got) {
    refusal_ = fmt::format("no TrainJob {}/{} (HTTP {})", trainjob_.namespace_, trainjob_.name, got->status);
  } else if (refused(got.error())) {
    refusal_ = fmt::format("the API refused the token: {}; {}", got.error().message, kEventsRoleHint);
  } else {
    spdlog::warn("events: TrainJob {}/{} not reached ({})", trainjob_.namespace_, trainjob_.name,
                 got.error().message);
    return EventSent::kFailed;
  }
  spdlog::warn("events: none on TrainJob {}/{}: {}; the job runs on without them", trainjob_.namespace_,
               trainjob_.name, refusal_);
  return EventSent::kRefused;
}

EventSent TrainJobEvents::send(const std::string& type, const std::string& reason,
                               const std::string& message) {
  if (EventSent known = resolve(); known != EventSent::kRecorded) return known;
  Deadline deadline(kEventBudget);
  auto body = event_body(trainjob_, type, reason, message, hostname(), std::chrono::system_clock::now());
  body["source"]["component"] = component_.substr(component_.rfind('/') + 1);
  body["reportingComponent"] = component_;
  auto made = client_.call("POST", fmt::format("/api/v1/namespaces/{}/events", trainjob_.namespace_),
                           dump_json(body), kCreateEvent, deadline);
  if (made && made->status / 100 == 2) {
    spdlog::debug("events: {} recorded on TrainJob {}", reason, trainjob_.name);
    return EventSent::kRecorded;
  }
  if (!made && refused(made.error())) {
    refusal_ = fmt::format("the API refused the token: {}; {}", made.error().message, kEventsRoleHint);
    spdlog::warn("events: {} was not recorded on TrainJob {}: {}; the job runs on without Events", reason,
                 trainjob_.name, refusal_);
    return EventSent::kRefused;
  }
  spdlog::warn("events: {} was not recorded on TrainJob {} ({})", reason, trainjob_.name,
               made ? fmt::format("HTTP {}", made->status) : made.error().message);
  return EventSent::kFailed;
}

}  // namespace tmpi

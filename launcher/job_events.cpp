// See job_events.h.
#include "launcher/job_events.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/json_fields.h"
#include "common/params.h"
#include "common/utf8.h"
#include "status/trainer_status.h"

namespace tmpi::launch {

namespace {

constexpr std::size_t kMaxMessage = 1024;
constexpr Millis kEventBudget{5000};  // per event, retries included
const KubeAction kGetTrainJob{"get", "trainer.kubeflow.org", "trainjobs"};
const KubeAction kCreateEvent{"create", "", "events"};

std::string hostname() {
  char name[256] = {0};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "mpi-launcher";
}

}  // namespace

nlohmann::json event_body(const TrainJobRef& trainjob, const std::string& type, const std::string& reason,
                          const std::string& message, const std::string& instance,
                          std::chrono::system_clock::time_point now) {
  std::string text = truncate_utf8(message, kMaxMessage, "...");  // never in the middle of a character
  std::string when = status::rfc3339(now);
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

JobEvents::JobEvents(const EventsOptions& options, const std::string& jobset) {
  trainjob_.name = options.trainjob.empty() ? jobset : options.trainjob;
  if (options.mode == EventsMode::kOff || trainjob_.name.empty()) return;
  auto config = load_kube_config(current_environment(), options.service_account_dir, options.kube_namespace);
  if (!config) {
    spdlog::debug("events: off ({})", config.error().message);
    return;
  }
  trainjob_.namespace_ = config->namespace_;
  client_ = std::make_unique<KubeClient>(std::move(*config), options.api_request_timeout);
}

bool JobEvents::resolve() {
  if (resolved_ || refused_) return resolved_;
  Deadline deadline(kEventBudget);
  std::string path = fmt::format("/apis/trainer.kubeflow.org/v1alpha1/namespaces/{}/trainjobs/{}",
                                 trainjob_.namespace_, trainjob_.name);
  auto got = client_->call("GET", path, "", kGetTrainJob, deadline);
  if (!got || got->status != 200) {
    refused_ = true;
    spdlog::info("events: none on TrainJob {}/{} ({})", trainjob_.namespace_, trainjob_.name,
                 got ? fmt::format("HTTP {}: no such TrainJob", got->status) : got.error().message);
    return false;
  }
  trainjob_.uid = string_at(got->json(), "/metadata/uid");
  resolved_ = true;
  return true;
}

bool JobEvents::warn(const std::string& reason, const std::string& message) {
  if (!client_ || !resolve()) return false;
  Deadline deadline(kEventBudget);
  auto body = event_body(trainjob_, "Warning", reason, message, hostname(), std::chrono::system_clock::now());
  auto made = client_->call("POST", fmt::format("/api/v1/namespaces/{}/events", trainjob_.namespace_),
                            dump_json(body), kCreateEvent, deadline);
  if (!made || made->status / 100 != 2) {
    spdlog::warn("events: {} was not recorded on TrainJob {} ({})", reason, trainjob_.name,
                 made ? fmt::format("HTTP {}", made->status) : made.error().message);
    refused_ = true;  // a refusal (RBAC) stays one; the job's end is near anyway
    return false;
  }
  spdlog::debug("events: {} recorded on TrainJob {}", reason, trainjob_.name);
  return true;
}

}  // namespace tmpi::launch

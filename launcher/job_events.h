// Kubernetes Events on the TrainJob for the job's discrete failures (a rendezvous that
// timed out, a failed preflight, a failed rank, a lost host, a stop), so that
// `kubectl describe trainjob` says what `kubectl logs` on the launcher would. Where RBAC
// allows (get trainjobs, create events: examples/rbac.yaml): the first event asks for the
// TrainJob's uid, which `kubectl describe` matches on; a refusal turns events off with one
// line that names the missing rule. Never fails, and never holds the job more than a few
// seconds: an event is a courtesy, the exit code and report.json are the record.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/kube_client.h"
#include "launcher/choices.h"

namespace tmpi::launch {

struct TrainJobRef {
  std::string namespace_, name, uid;
};

// A core/v1 Event about the TrainJob (pure; unit-tested). The message is cut to 1 KiB.
nlohmann::json event_body(const TrainJobRef& trainjob, const std::string& type, const std::string& reason,
                          const std::string& message, const std::string& instance,
                          std::chrono::system_clock::time_point now);

// --events, --trainjob, --service-account-dir, --namespace, --api-request-timeout.
struct EventsOptions {
  EventsMode mode = EventsMode::kAuto;
  std::string trainjob, service_account_dir, kube_namespace;
  std::chrono::milliseconds api_request_timeout{0};
};

class JobEvents {
 public:
  // Off with --events off, or when no API config loads (neither a service account nor
  // KUBECONFIG), or when no TrainJob name is known (--trainjob, else the JobSet's).
  JobEvents(const EventsOptions& options, const std::string& jobset);
  // A Warning event; returns whether the API took it.
  bool warn(const std::string& reason, const std::string& message);

 private:
  bool resolve();  // the TrainJob's uid, once

  std::unique_ptr<KubeClient> client_;
  TrainJobRef trainjob_;
  bool resolved_ = false, refused_ = false;
};

}  // namespace tmpi::launch

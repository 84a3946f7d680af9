// See api_relay_start.h.
#include "rendezvous/api_relay_start.h"

#include <unistd.h>

#include <array>

#include <spdlog/spdlog.h>

#include "common/files.h"
#include "common/kube_client.h"
#include "rendezvous/job_pods.h"
#include "rendezvous/launcher_end.h"
#include "rendezvous/trainjob_events.h"

namespace tmpi::rdv {

namespace {

constexpr Millis kPodListBudget{5000};  // within the launcher's wait for the answer (job_events.cpp)

}  // namespace

Expected<std::unique_ptr<ApiRelay>> start_api_relay(const Params& params, const std::string& private_key,
                                                    bool ranks_here) {
  const auto port = params.integer(param::kApiRelayPort);
  const std::string& sa_dir = params.str(param::kServiceAccountDir);
  if (port == 0 || !file_exists(sa_dir + "/token")) {
    spdlog::debug("api relay: off (no token in {}, or --api-relay-port 0)", sa_dir);
    return std::unique_ptr<ApiRelay>{};
  }
  const std::string& trainjob = params.str(param::kTrainjob);
  if (trainjob.empty())
    return make_error(Exit::kUsage,
                      "the API relay needs the TrainJob's name: pass --trainjob $(JOBSET_NAME)");
  // The token's own folder, never another config: KUBECONFIG is ignored here.
  std::map<std::string, std::string> env = current_environment();
  env.erase("KUBECONFIG");
  TMPI_ASSIGN(KubeConfig config, load_kube_config(env, sa_dir, params.str(param::kNamespace)));
  // Trainer names the JobSet after the TrainJob: its pods carry that name in their JobSet label.
  auto pods_client = std::make_shared<KubeClient>(config, params.duration(param::kApiRequestTimeout));
  auto events = std::make_shared<TrainJobEvents>(
      std::move(config), params.duration(param::kApiRequestTimeout), trainjob, "trainer-mpi/mpi-launcher");
  auto forward = [events](const RelayedEvent& event) -> std::string {
    switch (events->send(event.type, event.reason, event.message)) {
      case EventSent::kRecorded:
        return "";
      case EventSent::kRefused:
        return "refused: " + events->refusal();
      case EventSent::kFailed:
        break;
    }
    return "the API did not take it (see the sidecar's log)";
  };
  auto relay = std::make_unique<ApiRelay>(private_key, forward);
  relay->serve_pods([pods_client, trainjob](const std::vector<std::string>& hosts) {
    RelayedPods out;
    auto listed = list_job_pods(*pods_client, trainjob, hosts, Deadline(kPodListBudget));
    if (listed) {
      out.outcome = RelayedPods::Outcome::kListed;
      out.pods = std::move(*listed);
      return out;
    }
    out.outcome =
        listed.error().exit == Exit::kNoPerm ? RelayedPods::Outcome::kRefused : RelayedPods::Outcome::kFailed;
    out.why = listed.error().message;
    spdlog::warn("api relay: the pods of JobSet {} not listed: {}{}", trainjob, out.why,
                 out.outcome == RelayedPods::Outcome::kRefused ? std::string("; ") + kPodsRoleHint : "");
    return out;
  });
  // The pod's hostname is its spec.hostname: the launcher's name in the JobSet's label's pods.
  std::array<char, 256> hostname{};
  gethostname(hostname.data(), hostname.size() - 1);
  relay->at_stop([pods_client, events, trainjob, own = std::string(hostname.data()), ranks_here] {
    say_launcher_end([&] { return list_job_pods(*pods_client, trainjob, {own}, Deadline(kPodListBudget)); },
                     [&](const std::string& message) {
                       events->send("Warning", ranks_here ? "RankFailed" : "JobFailed", message);
                     },
                     ranks_here);
  });
  TMPI_ASSIGN(unsigned short bound, relay->start("127.0.0.1", static_cast<unsigned short>(port)));
  spdlog::info("api relay: Events about TrainJob {}/{} on 127.0.0.1:{}", events->trainjob().namespace_,
               trainjob, bound);
  return relay;
}

}  // namespace tmpi::rdv

// See job_events.h.
#include "launcher/job_events.h"

#include <spdlog/spdlog.h>

#include "common/job_key.h"
#include "common/params.h"
#include "common/proof.h"
#include "common/utf8.h"
#include "launcher/trouble_keys.h"
#include "rendezvous/api_relay_server.h"
#include "rendezvous/job_pods.h"

namespace tmpi::launch {

namespace {

constexpr std::size_t kRelayedMessage = 1024;  // rendezvous/trainjob_events.cpp's bound
// The relay answers within its own 5 s at the API; a little more for the loopback.
constexpr Millis kRelayBudget{6000};

}  // namespace

JobEvents::JobEvents(const EventsOptions& options, const std::string& jobset) {
  const std::string trainjob = options.trainjob.empty() ? jobset : options.trainjob;
  if (options.mode == EventsMode::kOff || trainjob.empty()) {
    off_ = true;
    return;
  }
  auto config = load_kube_config(current_environment(), options.service_account_dir, options.kube_namespace);
  jobset_ = jobset.empty() ? trainjob : jobset;
  if (config) {
    direct_pods_ = std::make_unique<KubeClient>(*config, options.api_request_timeout);
    direct_ = std::make_unique<TrainJobEvents>(std::move(*config), options.api_request_timeout, trainjob,
                                               "trainer-mpi/mpi-launcher");
    return;
  }
  auto key = options.relay_port > 0 ? find_job_key(options.ssh_dir) : Expected<KeyFile>(config.error());
  if (!key) {
    spdlog::debug("events: off ({}; no relay: {})", config.error().message, key.error().message);
    off_ = true;
    return;
  }
  relay_key_ = derive_rendezvous_key(key->text);
  relay_port_ = options.relay_port;
}

std::string event_message(const std::string& message) {
  if (message.size() <= kRelayedMessage) return message;
  const std::optional<std::string_view> key = trouble_key_in(message);
  if (!key) return truncate_utf8(message, kRelayedMessage, "...");
  const std::string note = " (see " + std::string(kTroublePage) + "#" + std::string(*key) + ")";
  std::string_view body = message;
  if (body.ends_with(note)) body.remove_suffix(note.size());
  return truncate_utf8(body, kRelayedMessage - note.size(), "...") + note;
}

bool JobEvents::warn(const std::string& reason, const std::string& message) {
  if (off_) return false;
  if (direct_) return direct_->send("Warning", reason, event_message(message)) == EventSent::kRecorded;
  return relay(reason, event_message(message));
}

bool JobEvents::relay(const std::string& reason, const std::string& message) {
  // Cut already (event_message) as the sidecar would cut it: the relay refuses a message past
  // its bound (4 KiB, after JSON's escapes), and a long preflight reason is one.
  auto answer = rdv::relay_event(static_cast<unsigned short>(relay_port_), relay_key_,
                                 rdv::RelayedEvent{"Warning", reason, message}, kRelayBudget);
  if (!answer) {
    // No relay in this pod (outside the runtimes): one line, and no more tries.
    spdlog::info("events: none on the TrainJob: no API relay on 127.0.0.1:{} ({})", relay_port_,
                 answer.error().message);
    off_ = true;
    return false;
  }
  if (!answer->recorded) {
    spdlog::warn("events: {} was not recorded on the TrainJob (the relay: {})", reason, answer->why);
    // The API's refusal stays one for the run (the relay says it in its log, naming the Role).
    if (answer->why.starts_with("HTTP 502") && answer->why.find("refused") != std::string::npos) off_ = true;
    return false;
  }
  spdlog::debug("events: {} recorded on the TrainJob through the relay", reason);
  return true;
}

}  // namespace tmpi::launch

namespace tmpi::launch {

rdv::RelayedPods JobEvents::pods(const std::vector<std::string>& hosts) {
  rdv::RelayedPods out;
  if (off_ || hosts.empty()) {
    out.why = "no API to ask (Events are off, or none is reachable)";
    return out;
  }
  if (direct_pods_) {
    auto listed = list_job_pods(*direct_pods_, jobset_, hosts, Deadline(kRelayBudget));
    if (listed) {
      out.outcome = rdv::RelayedPods::Outcome::kListed;
      out.pods = std::move(*listed);
    } else {
      out.outcome = listed.error().exit == Exit::kNoPerm ? rdv::RelayedPods::Outcome::kRefused
                                                         : rdv::RelayedPods::Outcome::kFailed;
      out.why = listed.error().message;
    }
    return out;
  }
  auto answer = rdv::relay_pods(static_cast<unsigned short>(relay_port_), relay_key_, hosts, kRelayBudget);
  if (!answer) {
    out.why = fmt::format("no API relay on 127.0.0.1:{} ({})", relay_port_, answer.error().message);
    return out;
  }
  return *answer;
}

}  // namespace tmpi::launch

// See pod_status.h.
#include "rendezvous/pod_status.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/json_filter.h"
#include "common/utf8.h"

namespace tmpi {

using nlohmann::json;

namespace {

constexpr const char* kPodRestartLabel = "jobset.sigs.k8s.io/restart-attempt";

// The fields a summary reads; the rest of a pod (its spec, env, volumes) is skipped.
const std::vector<JsonPath>& pod_status_fields() {
  static const std::vector<JsonPath> fields = [] {
    std::vector<JsonPath> out;
    for (const char* meta : {"name", "deletionTimestamp"}) out.push_back({"metadata", meta});
    out.push_back({"metadata", "labels", kPodRestartLabel});
    out.push_back({"spec", "hostname"});
    out.push_back({"status", "phase"});
    for (const char* field : {"type", "status", "reason", "message"})
      out.push_back({"status", "conditions", "[]", field});
    for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
      out.push_back({"status", list, "[]", "name"});
      for (const char* field : {"reason", "message"})
        out.push_back({"status", list, "[]", "state", "waiting", field});
    }
    for (const char* state : {"state", "lastState"})
      for (const char* field : {"reason", "exitCode"})
        out.push_back({"status", "containerStatuses", "[]", state, "terminated", field});
    out.push_back({"spec", "containers", "[]", "name"});
    out.push_back({"spec", "containers", "[]", "resources", "limits", "memory"});
    return out;
  }();
  return fields;
}

// The same paths under the list's items, and the list's continue token.
std::vector<JsonPath> pod_list_fields() {
  std::vector<JsonPath> out;
  for (JsonPath path : pod_status_fields()) {
    path.insert(path.begin(), {"items", "[]"});
    out.push_back(std::move(path));
  }
  out.push_back({"metadata", "continue"});
  return out;
}

const json& field_of(const json& object, const char* key) {
  static const json empty = json::object();
  if (!object.is_object()) return empty;
  auto it = object.find(key);
  return it != object.end() ? *it : empty;
}

// A string field, cut at a whole character and made valid UTF-8; "" when it is not a string.
std::string text_of(const json& object, const char* key, std::size_t max_bytes) {
  const json& value = field_of(object, key);
  return value.is_string() ? truncate_utf8(valid_utf8(value.get_ref<const std::string&>()), max_bytes, "...")
                           : "";
}

std::string host_label(std::string_view host) {
  return std::string(host.substr(0, host.find('.')));
}

std::string known_phase(const std::string& phase) {
  static const std::set<std::string> kPhases{"Pending", "Running", "Succeeded", "Failed", "Unknown"};
  return kPhases.contains(phase) ? phase : "Unknown";
}

long long attempt_of(const json& pod) {
  std::string text = text_of(field_of(field_of(pod, "metadata"), "labels"), kPodRestartLabel, 10);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(text);
}

// The memory limit the pod's spec gives a container ("" for none): a quantity, kept as written.
std::string memory_limit_of(const json& pod, const std::string& container) {
  const json& containers = field_of(field_of(pod, "spec"), "containers");
  for (const json& spec : containers.is_array() ? containers : json::array())
    if (text_of(spec, "name", 63) == container)
      return text_of(field_of(field_of(spec, "resources"), "limits"), "memory", 32);
  return "";
}

// The app containers that ended, by their state, else their last state (the kubelet started
// the container again: its previous run's end is the one a lost host's launcher asks about).
void add_ended(const json& pod, const json& status, PodStatusSummary& out) {
  const json& containers = field_of(status, "containerStatuses");
  for (const json& container : containers.is_array() ? containers : json::array()) {
    if (out.ended.size() >= kPodStatusWaiting) return;
    for (const char* state : {"state", "lastState"}) {
      const json& terminated = field_of(field_of(container, state), "terminated");
      if (!terminated.is_object() || terminated.empty()) continue;
      const json& code = field_of(terminated, "exitCode");
      EndedContainer ended{
          text_of(container, "name", 63), text_of(terminated, "reason", kPodStatusReasonBytes),
          code.is_number_integer() ? static_cast<int>(std::clamp<long long>(code.get<long long>(), -1, 255))
                                   : -1,
          ""};
      ended.memory_limit = memory_limit_of(pod, ended.container);
      out.ended.push_back(std::move(ended));
      break;
    }
  }
}

PodStatusSummary summarize(const json& pod, const std::string& host) {
  PodStatusSummary out;
  out.host = host;
  out.found = true;
  const json& metadata = field_of(pod, "metadata");
  out.pod = text_of(metadata, "name", 253);
  out.terminating = !field_of(metadata, "deletionTimestamp").empty();
  const json& status = field_of(pod, "status");
  out.phase = known_phase(text_of(status, "phase", 16));
  const json& conditions = field_of(status, "conditions");
  for (const json& condition : conditions.is_array() ? conditions : json::array()) {
    if (text_of(condition, "type", 32) != "PodScheduled") continue;
    out.scheduled = text_of(condition, "status", 8);
    out.scheduled_reason = text_of(condition, "reason", kPodStatusReasonBytes);
    out.scheduled_message = text_of(condition, "message", kPodStatusMessageBytes);
  }
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    const json& containers = field_of(status, list);
    for (const json& container : containers.is_array() ? containers : json::array()) {
      // field_of gives an empty object for a missing key: a container that does not wait has none.
      const json& state = field_of(container, "state");
      if (!state.is_object() || !state.contains("waiting") || out.waiting.size() >= kPodStatusWaiting)
        continue;
      const json& waiting = field_of(state, "waiting");
      out.waiting.push_back({text_of(container, "name", 63),
                             text_of(waiting, "reason", kPodStatusReasonBytes),
                             text_of(waiting, "message", kPodStatusMessageBytes)});
    }
  }
  add_ended(pod, status, out);
  return out;
}

}  // namespace

PodStatusReader::PodStatusReader(std::vector<std::string> hosts) : hosts_(std::move(hosts)) {
  if (hosts_.size() > kPodStatusHosts) hosts_.resize(kPodStatusHosts);
}

Expected<std::string> PodStatusReader::add(std::string_view page, std::string_view origin) {
  std::map<std::string, std::string, std::less<>> wanted;  // first label -> the host as asked
  for (const std::string& host : hosts_) wanted.emplace(host_label(host), host);
  JsonStream stream{{"items"}, [&](json&& pod, std::size_t) {
                      const std::string hostname = text_of(field_of(pod, "spec"), "hostname", 253);
                      auto asked = wanted.find(hostname);
                      if (hostname.empty() || asked == wanted.end()) return true;
                      Kept candidate{summarize(pod, asked->second), attempt_of(pod)};
                      auto [at, fresh] = kept_.try_emplace(asked->second, candidate);
                      // A live pod answers for its host over one being deleted, then the later attempt.
                      auto rank = [](const Kept& k) { return std::pair(!k.summary.terminating, k.attempt); };
                      if (!fresh && rank(candidate) > rank(at->second)) at->second = std::move(candidate);
                      return true;
                    }};
  std::string syntax;
  json doc = parse_json_filtered(page, pod_list_fields(), &syntax, &stream);
  if (doc.is_discarded())
    return make_error(Exit::kData, "{}: not valid JSON ({}); the API answered something else than a PodList",
                      origin, syntax);
  if (!doc.is_object() || !field_of(doc, "items").is_array())
    return make_error(Exit::kData, "{}: field \"items\" is missing or not an array; not a PodList", origin);
  return text_of(field_of(doc, "metadata"), "continue", 4096);
}

bool PodStatusReader::all_found() const {
  return kept_.size() == hosts_.size();
}

std::vector<PodStatusSummary> PodStatusReader::summaries() const {
  std::vector<PodStatusSummary> out;
  for (const std::string& host : hosts_) {
    auto kept = kept_.find(host);
    if (kept != kept_.end()) {
      out.push_back(kept->second.summary);
    } else {
      PodStatusSummary none;  // found stays false: no pod of the JobSet holds the name
      none.host = host;
      out.push_back(std::move(none));
    }
  }
  return out;
}

json pod_statuses_json(const std::vector<PodStatusSummary>& pods) {
  json hosts = json::array();
  for (const PodStatusSummary& pod : pods) {
    if (!pod.found) {
      hosts.push_back({{"host", pod.host}, {"found", false}});
      continue;
    }
    json waiting = json::array();
    for (const auto& container : pod.waiting)
      waiting.push_back(
          {{"container", container.container}, {"reason", container.reason}, {"message", container.message}});
    json ended = json::array();
    for (const auto& container : pod.ended)
      ended.push_back({{"container", container.container},
                       {"reason", container.reason},
                       {"exitCode", container.exit_code},
                       {"memoryLimit", container.memory_limit}});
    hosts.push_back({{"host", pod.host},
                     {"found", true},
                     {"pod", pod.pod},
                     {"phase", pod.phase},
                     {"terminating", pod.terminating},
                     {"scheduled", pod.scheduled},
                     {"scheduledReason", pod.scheduled_reason},
                     {"scheduledMessage", pod.scheduled_message},
                     {"waiting", waiting},
                     {"ended", ended}});
  }
  return {{"hosts", hosts}};
}

namespace {

Error bad_pod_answer(const std::string& why) {
  return make_error(
      Exit::kData,
      "the API relay's pod answer: {}; expected {{\"hosts\": [...]}} as pod_statuses_json writes it", why);
}

// A string member within its bound, else an error naming it.
Status take_pod_text(const json& object, const char* key, std::size_t max_bytes, std::string& out) {
  const json& value = field_of(object, key);
  if (!value.is_string() || value.get_ref<const std::string&>().size() > max_bytes ||
      valid_utf8(value.get_ref<const std::string&>()) != value.get_ref<const std::string&>())
    return bad_pod_answer(fmt::format("\"{}\" is not UTF-8 text of at most {} bytes", key, max_bytes));
  out = value.get<std::string>();
  return ok_status();
}

// "ended": absent (a sidecar of before) or an array within its bound, each a container's end.
Status take_ended(const json& entry, std::vector<EndedContainer>& out) {
  if (!entry.contains("ended")) return ok_status();
  const json& ended = field_of(entry, "ended");
  if (!ended.is_array() || ended.size() > kPodStatusWaiting)
    return bad_pod_answer(fmt::format("\"ended\" is not an array of at most {}", kPodStatusWaiting));
  for (const json& container : ended) {
    EndedContainer kept;
    TMPI_CHECK(take_pod_text(container, "container", 63, kept.container));
    TMPI_CHECK(take_pod_text(container, "reason", kPodStatusReasonBytes, kept.reason));
    TMPI_CHECK(take_pod_text(container, "memoryLimit", 32, kept.memory_limit));
    const json& code = field_of(container, "exitCode");
    if (!code.is_number_integer() || code.get<long long>() < -1 || code.get<long long>() > 255)
      return bad_pod_answer("\"exitCode\" is not an integer from -1 to 255");
    kept.exit_code = code.get<int>();
    out.push_back(std::move(kept));
  }
  return ok_status();
}

}  // namespace

Expected<std::vector<PodStatusSummary>> read_pod_statuses(std::string_view body) {
  if (body.size() > kPodStatusAnswerBytes) return bad_pod_answer(fmt::format("{} bytes", body.size()));
  json doc = json::parse(body, nullptr, false);
  const json& hosts = field_of(doc, "hosts");
  if (!hosts.is_array() || hosts.size() > kPodStatusHosts)
    return bad_pod_answer(fmt::format("\"hosts\" is not an array of at most {}", kPodStatusHosts));
  std::vector<PodStatusSummary> out;
  for (const json& entry : hosts) {
    PodStatusSummary pod;
    TMPI_CHECK(take_pod_text(entry, "host", 253, pod.host));
    if (!field_of(entry, "found").is_boolean()) return bad_pod_answer("\"found\" is not a boolean");
    pod.found = field_of(entry, "found").get<bool>();
    if (pod.found) {
      TMPI_CHECK(take_pod_text(entry, "pod", 253, pod.pod));
      TMPI_CHECK(take_pod_text(entry, "phase", 16, pod.phase));
      if (!field_of(entry, "terminating").is_boolean())
        return bad_pod_answer("\"terminating\" is not a boolean");
      pod.terminating = field_of(entry, "terminating").get<bool>();
      TMPI_CHECK(take_pod_text(entry, "scheduled", 8, pod.scheduled));
      TMPI_CHECK(take_pod_text(entry, "scheduledReason", kPodStatusReasonBytes, pod.scheduled_reason));
      TMPI_CHECK(take_pod_text(entry, "scheduledMessage", kPodStatusMessageBytes, pod.scheduled_message));
      const json& waiting = field_of(entry, "waiting");
      if (!waiting.is_array() || waiting.size() > kPodStatusWaiting)
        return bad_pod_answer(fmt::format("\"waiting\" is not an array of at most {}", kPodStatusWaiting));
      for (const json& container : waiting) {
        WaitingContainer kept;
        TMPI_CHECK(take_pod_text(container, "container", 63, kept.container));
        TMPI_CHECK(take_pod_text(container, "reason", kPodStatusReasonBytes, kept.reason));
        TMPI_CHECK(take_pod_text(container, "message", kPodStatusMessageBytes, kept.message));
        pod.waiting.push_back(std::move(kept));
      }
      TMPI_CHECK(take_ended(entry, pod.ended));
    }
    out.push_back(std::move(pod));
  }
  return out;
}

}  // namespace tmpi

// Topology from a pod list. The rules (DESIGN §2, issue 3):
//  - only pods of one JobSet (the --jobset one, or the only one in the list);
//  - terminating (deletionTimestamp) and Failed/Succeeded pods are left out, with a note;
//  - a stale twin of a recreated pod never replaces the live one (higher restart attempt,
//    then newer creationTimestamp, wins);
//  - order: replicated-job order (job-global-index where JobSet sets it, else the launcher
//    job first, then by name), then job index, then completion index;
//  - slots: the flag, else the nvidia.com/gpu limit of the pod's main container, else 1.
#include "initcontainer/sources.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace tmpi::init {

using nlohmann::json;

namespace {

constexpr const char* kJobSetLabel = "jobset.sigs.k8s.io/jobset-name";
constexpr const char* kReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name";
constexpr const char* kJobIndexLabel = "jobset.sigs.k8s.io/job-index";
constexpr const char* kGlobalIndexLabel = "jobset.sigs.k8s.io/job-global-index";
constexpr const char* kRestartLabel = "jobset.sigs.k8s.io/restart-attempt";
constexpr const char* kCompletionIndex = "batch.kubernetes.io/job-completion-index";

struct Pod {
  Host host;
  std::string jobset, creation;
  int global_index = -1, restart = 0, completion_index = 0;
};

std::string text_at(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int int_of(const std::string& text, int fallback) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) {
    return fallback;
  }
  return std::stoi(text);
}

// A GPU limit is a quantity: "8" or 8. Fractions make no sense for GPUs.
int gpu_limit(const json& spec, const std::string& group) {
  if (!spec.is_object() || !spec.contains("containers") || !spec["containers"].is_array()) return 0;
  const json* main = nullptr;
  for (const auto& container : spec["containers"]) {
    if (text_at(container, "name") == group) main = &container;
  }
  if (main == nullptr && !spec["containers"].empty()) main = &spec["containers"][0];
  if (main == nullptr) return 0;
  json limits = main->value("/resources/limits"_json_pointer, json::object());
  if (!limits.is_object() || !limits.contains("nvidia.com/gpu")) return 0;
  const json& value = limits["nvidia.com/gpu"];
  if (value.is_number_integer()) return value.get<int>();
  return value.is_string() ? int_of(value.get<std::string>(), 0) : 0;
}

Expected<std::optional<Pod>> read_pod(const json& item, std::size_t index, std::string_view origin,
                                      std::vector<std::string>& notes) {
  if (!item.is_object() || !item.contains("metadata") || !item["metadata"].is_object()) {
    return make_error(Exit::kUsage, "{}: items[{}] has no metadata object; is this the output of "
                      "`kubectl get pods -o json`?", origin, index);
  }
  const json& meta = item["metadata"];
  const json labels = meta.value("labels", json::object());
  const json annotations = meta.value("annotations", json::object());
  const json spec = item.value("spec", json::object());
  const json status = item.value("status", json::object());
  Pod pod;
  pod.host.pod = text_at(meta, "name");
  pod.jobset = text_at(labels, kJobSetLabel);
  if (pod.jobset.empty()) return std::optional<Pod>{};  // not a JobSet pod: not ours
  std::string phase = text_at(status, "phase");
  if (meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null()) {
    notes.push_back(fmt::format("left out pod {}: terminating", pod.host.pod));
    pod.host.role = "skip";
  } else if (phase == "Failed" || phase == "Succeeded") {
    notes.push_back(fmt::format("left out pod {}: phase {}", pod.host.pod, phase));
    pod.host.role = "skip";
  }
  pod.host.group = text_at(labels, kReplicatedJobLabel);
  pod.host.job_index = int_of(text_at(labels, kJobIndexLabel), 0);
  pod.global_index = int_of(text_at(labels, kGlobalIndexLabel), -1);
  pod.restart = int_of(text_at(labels, kRestartLabel), 0);
  std::string completion = text_at(labels, kCompletionIndex);
  if (completion.empty()) completion = text_at(annotations, kCompletionIndex);
  pod.completion_index = int_of(completion, 0);
  pod.host.pod_index = pod.completion_index;
  pod.creation = text_at(meta, "creationTimestamp");
  pod.host.address = text_at(status, "podIP");
  pod.host.gpus = gpu_limit(spec, pod.host.group);
  std::string hostname = text_at(spec, "hostname"), subdomain = text_at(spec, "subdomain");
  if (pod.host.role != "skip" && (hostname.empty() || subdomain.empty())) {
    return make_error(Exit::kUsage, "{}: pod {} (items[{}]) has no spec.{}; JobSet pods get both "
                      "spec.hostname and spec.subdomain: check the JobSet's network settings "
                      "(enableDNSHostnames)", origin, pod.host.pod, index,
                      hostname.empty() ? "hostname" : "subdomain");
  }
  pod.host.name = hostname + "." + subdomain;
  return std::optional<Pod>{pod};
}

}  // namespace

Expected<Topology> topology_from_pod_list(std::string_view json_text, std::string_view origin,
                                          const SourceOptions& options) {
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded()) {
    return make_error(Exit::kUsage, "{}: not valid JSON; produce it with `kubectl get pods -o json`", origin);
  }
  if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array()) {
    return make_error(Exit::kUsage, "{}: field \"items\" is missing or not an array; expected a pod "
                      "list from `kubectl get pods -o json`", origin);
  }
  Topology topology;
  std::vector<Pod> pods;
  std::set<std::string> jobsets;
  for (std::size_t i = 0; i < doc["items"].size(); ++i) {
    TMPI_ASSIGN(auto pod, read_pod(doc["items"][i], i, origin, topology.notes));
    if (!pod) continue;
    if (!options.jobset.empty() && pod->jobset != options.jobset) continue;
    jobsets.insert(pod->jobset);
    if (pod->host.role != "skip") pods.push_back(std::move(*pod));
  }
  if (jobsets.size() > 1) {
    return make_error(Exit::kUsage, "{}: holds pods of {} JobSets ({}); pass --jobset NAME to choose one",
                      origin, jobsets.size(), fmt::join(jobsets, ", "));
  }
  if (pods.empty()) {
    return make_error(Exit::kUsage, "{}: no live pod of JobSet {}; check the name and the namespace",
                      origin, options.jobset.empty() ? "(any)" : options.jobset);
  }
  topology.jobset = *jobsets.begin();
  // Stale twins: keep the pod of the latest restart attempt, then the newest.
  std::map<std::string, Pod> by_name;
  for (auto& pod : pods) {
    auto [it, fresh] = by_name.try_emplace(pod.host.name, pod);
    if (fresh) continue;
    bool newer = std::tie(pod.restart, pod.creation) > std::tie(it->second.restart, it->second.creation);
    const Pod& stale = newer ? it->second : pod;
    topology.notes.push_back(fmt::format("left out pod {}: stale twin of {}", stale.host.pod, stale.host.name));
    if (newer) it->second = pod;
  }
  pods.clear();
  bool all_global = true;
  for (auto& [name, pod] : by_name) {
    all_global = all_global && pod.global_index >= 0;
    pods.push_back(pod);
  }
  auto order = [&](const Pod& pod) {
    int launcher_last = pod.host.group == options.launcher_job ? 0 : 1;
    return all_global ? std::make_tuple(pod.global_index, 0, std::string(), pod.host.job_index, pod.completion_index)
                      : std::make_tuple(0, launcher_last, pod.host.group, pod.host.job_index, pod.completion_index);
  };
  std::sort(pods.begin(), pods.end(), [&](const Pod& a, const Pod& b) { return order(a) < order(b); });
  for (auto& pod : pods) {
    Host host = pod.host;
    host.slots = options.slots ? *options.slots : (host.gpus > 0 ? host.gpus : 1);
    if (topology.subdomain.empty()) topology.subdomain = host.name.substr(host.name.find('.') + 1);
    bool is_launcher = host.group == options.launcher_job;
    host.role = is_launcher ? "launcher" : "node";
    if (is_launcher) {
      if (topology.launcher) {
        return make_error(Exit::kUsage, "{}: two launcher pods ({} and {}); the launcher job must have one pod",
                          origin, topology.launcher->pod, host.pod);
      }
      topology.launcher = host;
      if (!options.launcher_as_node) continue;
    }
    if (host.address.empty()) topology.notes.push_back(fmt::format("pod {} has no IP yet", host.pod));
    topology.hosts.push_back(std::move(host));
  }
  TMPI_CHECK(validate_topology(topology, origin));
  return topology;
}

}  // namespace tmpi::init

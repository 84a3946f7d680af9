// Topology from a pod list. The rules (docs/design.md, Names):
//  - only pods of one JobSet (the --jobset one, or the only one in the list);
//  - terminating (deletionTimestamp) and Failed/Succeeded pods are left out, with a note;
//  - a stale twin of a recreated pod never replaces the live one (higher restart attempt,
//    then newer creationTimestamp, wins);
//  - order: replicated-job order (job-global-index where JobSet sets it, else the launcher
//    job first, then by name), then job index, then completion index;
//  - slots: the flag, else the nvidia.com/gpu limit of the pod's main container, else 1;
//    fewer slots than that limit is warned of (slots_below_gpus).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/json_filter.h"
#include "common/param_names.h"
#include "common/params.h"
#include "initcontainer/sources.h"

namespace tmpi::init {

using nlohmann::json;

namespace {

constexpr const char* kJobSetLabel = "jobset.sigs.k8s.io/jobset-name";
constexpr const char* kReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name";
constexpr const char* kJobIndexLabel = "jobset.sigs.k8s.io/job-index";
constexpr const char* kGlobalIndexLabel = "jobset.sigs.k8s.io/job-global-index";
constexpr const char* kRestartLabel = "jobset.sigs.k8s.io/restart-attempt";
constexpr const char* kCompletionIndex = "batch.kubernetes.io/job-completion-index";

// The fields read_pod looks at; everything else in a pod (env, volumes, status detail) is
// skipped while parsing, which keeps a 10,000-pod list fast and small.
const std::vector<JsonPath>& pod_fields() {
  static const std::vector<JsonPath> fields = [] {
    std::vector<JsonPath> out;
    for (const char* meta : {"name", "deletionTimestamp", "creationTimestamp"}) {
      out.push_back({"items", "[]", "metadata", meta});
    }
    for (const char* label : {kJobSetLabel, kReplicatedJobLabel, kJobIndexLabel, kGlobalIndexLabel,
                              kRestartLabel, kCompletionIndex}) {
      out.push_back({"items", "[]", "metadata", "labels", label});
    }
    out.push_back({"items", "[]", "metadata", "annotations", kCompletionIndex});
    out.push_back({"items", "[]", "spec", "hostname"});
    out.push_back({"items", "[]", "spec", "subdomain"});
    out.push_back({"items", "[]", "spec", "containers", "[]", "name"});
    out.push_back({"items", "[]", "spec", "containers", "[]", "resources", "limits", "nvidia.com/gpu"});
    out.push_back({"items", "[]", "status", "phase"});
    out.push_back({"items", "[]", "status", "podIP"});
    out.push_back({"metadata", "continue"});
    return out;
  }();
  return fields;
}

}  // namespace

struct PodListReader::Pod {
  Host host;
  std::string jobset, creation;
  int global_index = -1, restart = 0, completion_index = 0;
  bool left_out = false;  // terminating, or ended: noted, and no host of the job
};

namespace {

using Pod = PodListReader::Pod;

// A member of an object, or an empty object when it is missing or `object` is none: read
// in place, since a pod's parts are read once each.
const json& member(const json& object, const char* key) {
  static const json empty = json::object();
  if (!object.is_object()) return empty;
  auto it = object.find(key);
  return it != object.end() ? *it : empty;
}

std::string text_at(const json& object, const char* key) {
  const json& value = member(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

int int_of(const std::string& text, int fallback) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) {
    return fallback;
  }
  return std::stoi(text);
}

// A GPU limit is a quantity: "8" or 8. Fractions make no sense for GPUs. A container that
// is not an object, or limits of the wrong type, give none.
int gpu_limit(const json& spec, const std::string& group) {
  const json& containers = member(spec, "containers");
  if (!containers.is_array() || containers.empty()) return 0;
  const json* main = &containers[0];
  for (const auto& container : containers) {
    if (text_at(container, "name") == group) main = &container;
  }
  const json& limits = member(member(*main, "resources"), "limits");
  if (!limits.is_object() || !limits.contains("nvidia.com/gpu")) return 0;
  const json& value = limits["nvidia.com/gpu"];
  // Bounded as a number, never wrapped (4294967304 is not 8): a count beyond any host reaches
  // validate_topology as one, which names it.
  if (value.is_number_integer())
    return static_cast<int>(std::clamp<std::int64_t>(int_at(value, "", 0), 0, INT32_MAX));
  return value.is_string() ? int_of(value.get<std::string>(), 0) : 0;
}

Expected<std::optional<Pod>> read_pod(const json& item, std::size_t index, std::string_view origin,
                                      std::vector<std::string>& notes) {
  if (!item.is_object() || !item.contains("metadata") || !item["metadata"].is_object()) {
    return make_error(Exit::kData,
                      "{}: items[{}] has no metadata object; is this the output of "
                      "`kubectl get pods -o json`?",
                      origin, index);
  }
  const json& meta = item["metadata"];
  const json& labels = member(meta, "labels");
  const json& annotations = member(meta, "annotations");
  const json& spec = member(item, "spec");
  const json& status = member(item, "status");
  Pod pod;
  pod.host.pod = text_at(meta, "name");
  pod.jobset = text_at(labels, kJobSetLabel);
  if (pod.jobset.empty()) return std::optional<Pod>{};  // not a JobSet pod: not ours
  std::string phase = text_at(status, "phase");
  if (meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null()) {
    notes.push_back(fmt::format("left out pod {}: terminating", pod.host.pod));
    pod.left_out = true;
  } else if (phase == "Failed" || phase == "Succeeded") {
    notes.push_back(fmt::format("left out pod {}: phase {}", pod.host.pod, phase));
    pod.left_out = true;
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
  if (!pod.left_out && (hostname.empty() || subdomain.empty())) {
    return make_error(Exit::kData,
                      "{}: pod {} (items[{}]) has no spec.{}; JobSet pods get both "
                      "spec.hostname and spec.subdomain: check the JobSet's network settings "
                      "(enableDNSHostnames)",
                      origin, pod.host.pod, index, hostname.empty() ? "hostname" : "subdomain");
  }
  pod.host.name = hostname + "." + subdomain;
  return std::optional<Pod>{std::move(pod)};
}

}  // namespace

PodListReader::PodListReader(SourceOptions options) : options_(std::move(options)) {}
PodListReader::~PodListReader() = default;

Expected<std::string> PodListReader::add(std::string_view json_text, std::string_view origin) {
  return add(PaddedText::copy(json_text), origin);
}

Expected<std::string> PodListReader::add(const PaddedText& json_text, std::string_view origin) {
  std::optional<Error> failure;
  // Pods are streamed one at a time: memory follows the pods kept, not the list's size.
  JsonStream stream{{"items"}, [&](json&& item, std::size_t index) {
                      auto pod = read_pod(item, index, origin, notes_);
                      if (!pod) {
                        failure = pod.take_error();
                        return false;
                      }
                      if (!*pod || (!options_.jobset.empty() && (*pod)->jobset != options_.jobset))
                        return true;
                      jobsets_.insert((*pod)->jobset);
                      if (!(*pod)->left_out) pods_.push_back(std::move(**pod));
                      return true;
                    }};
  std::string syntax;
  json doc = parse_json_filtered(json_text, pod_fields(), &syntax, &stream);
  if (failure) return *failure;
  if (doc.is_discarded()) {
    return make_error(Exit::kData, "{}: not valid JSON ({}); produce it with `kubectl get pods -o json`",
                      origin, syntax);
  }
  if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array()) {
    return make_error(Exit::kData,
                      "{}: field \"items\" is missing or not an array; expected a pod "
                      "list from `kubectl get pods -o json`",
                      origin);
  }
  std::string next;
  if (auto it = doc.find("metadata"); it != doc.end() && it->is_object()) next = text_at(*it, "continue");
  return next;
}

std::map<std::string, std::string> PodListReader::live_hosts() const {
  std::map<std::string, std::string> out;
  for (const auto& pod : pods_) {
    auto& address = out[pod.host.name];
    if (address.empty()) address = pod.host.address;
  }
  return out;
}

Expected<Topology> PodListReader::topology(std::string_view origin) const {
  if (jobsets_.size() > 1) {
    return make_error(Exit::kData, "{}: holds pods of {} JobSets ({}); pass --jobset NAME to choose one",
                      origin, jobsets_.size(), fmt::join(jobsets_, ", "));
  }
  if (pods_.empty()) {
    return make_error(Exit::kData, "{}: no live pod of JobSet {}; check the name and the namespace", origin,
                      options_.jobset.empty() ? "(any)" : options_.jobset);
  }
  Topology topology;
  topology.notes = notes_;
  topology.jobset = *jobsets_.begin();
  std::vector<Pod> pods = pods_;
  // Stale twins: keep the pod of the latest restart attempt, then the newest.
  std::map<std::string_view, std::size_t> by_name;  // host name -> index of the pod kept
  std::vector<bool> stale(pods.size(), false);
  for (std::size_t i = 0; i < pods.size(); ++i) {
    auto [it, fresh] = by_name.try_emplace(pods[i].host.name, i);
    if (fresh) continue;
    Pod& kept = pods[it->second];
    bool newer = std::tie(pods[i].restart, pods[i].creation) > std::tie(kept.restart, kept.creation);
    std::size_t loser = newer ? it->second : i;
    topology.notes.push_back(
        fmt::format("left out pod {}: stale twin of {}", pods[loser].host.pod, pods[loser].host.name));
    stale[loser] = true;
    if (newer) it->second = i;
  }
  by_name.clear();
  std::size_t kept = 0;
  bool all_global = true;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (stale[i]) continue;
    all_global = all_global && pods[i].global_index >= 0;
    if (kept != i) pods[kept] = std::move(pods[i]);
    ++kept;
  }
  pods.resize(kept);
  auto order = [&](const Pod& pod) {
    int launcher_first = pod.host.group == options_.launcher_job ? 0 : 1;
    std::string_view group = pod.host.group;
    return all_global ? std::make_tuple(pod.global_index, 0, std::string_view(), pod.host.job_index,
                                        pod.completion_index)
                      : std::make_tuple(0, launcher_first, group, pod.host.job_index, pod.completion_index);
  };
  std::sort(pods.begin(), pods.end(), [&](const Pod& a, const Pod& b) { return order(a) < order(b); });
  for (auto& pod : pods) {
    Host host = std::move(pod.host);
    host.slots = options_.slots ? *options_.slots : (host.gpus > 0 ? host.gpus : 1);
    if (topology.subdomain.empty()) topology.subdomain = host.name.substr(host.name.find('.') + 1);
    bool is_launcher = host.group == options_.launcher_job;
    host.role = is_launcher ? PodRole::kLauncher : PodRole::kNode;
    if (is_launcher) {
      if (topology.launcher) {
        return make_error(Exit::kData,
                          "{}: two launcher pods ({} and {}); the launcher job must have one pod", origin,
                          topology.launcher->pod, host.pod);
      }
      topology.launcher = host;
      if (!options_.launcher_as_node) continue;
    }
    if (host.address.empty()) topology.notes.push_back(fmt::format("pod {} has no IP yet", host.pod));
    topology.hosts.push_back(std::move(host));
  }
  TMPI_CHECK(validate_topology(topology, origin));
  return topology;
}

Expected<Topology> topology_from_pod_list(std::string_view json_text, std::string_view origin,
                                          const SourceOptions& options) {
  return topology_from_pod_list(PaddedText::copy(json_text), origin, options);
}

Expected<Topology> topology_from_pod_list(const PaddedText& json_text, std::string_view origin,
                                          const SourceOptions& options) {
  PodListReader reader(options);
  TMPI_CHECK(reader.add(json_text, origin));
  return reader.topology(origin);
}

std::optional<std::string> slots_below_gpus(const Topology& topology) {
  const Host* first = nullptr;
  std::size_t short_hosts = 0;
  for (const auto& host : topology.hosts) {
    if (host.gpus <= host.slots) continue;
    if (first == nullptr) first = &host;
    ++short_hosts;
  }
  if (first == nullptr) return std::nullopt;
  return fmt::format(
      "host {} has {} slot(s) but its pod gives it {} GPU(s) (nvidia.com/gpu){}: "
      "it runs only {} rank(s), and the other GPUs stay idle; "
      "put the GPU in the TrainJob's resources "
      "(the SDK's resources_per_node={{\"nvidia.com/gpu\": {}}}, resourcesPerNode in YAML) "
      "so that Trainer counts {} slots, or set --slots {} ({})",
      first->name, first->slots, first->gpus,
      short_hosts > 1 ? fmt::format(", as do {} more host(s)", short_hosts - 1) : "", first->slots,
      first->gpus, first->gpus, first->gpus, env_name(param::kSlots.name));
}

}  // namespace tmpi::init

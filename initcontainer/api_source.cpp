// See api_source.h. Every call runs under the one deadline of --wait-timeout, so a slow or
// failing API server ends in one clear timeout (exit 75), never a hang. The Secret's name is
// predictable, and whoever may create Secrets in the namespace could make it before the job
// does: an existing one is adopted only when it bears every mark of the one mpi-init makes.
#include "initcontainer/api_source.h"

#include <algorithm>
#include <thread>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/json_fields.h"
#include "common/param_names.h"
#include "common/params.h"
#include "common/utf8.h"

namespace tmpi::init {

namespace {

using nlohmann::json;

const KubeAction kGetJobSet{"get", "jobset.x-k8s.io", "jobsets"};
const KubeAction kListPods{"list", "", "pods"};
const KubeAction kGetSecret{"get", "", "secrets"};
const KubeAction kCreateSecret{"create", "", "secrets"};

// The marks of the Secret mpi-init makes, which an existing one must bear to be adopted.
constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
constexpr const char* kManagedBy = "trainer-mpi";
constexpr const char* kSecretType = "kubernetes.io/ssh-auth";

bool owned_by(const json& secret, const JobSetInfo& jobset) {
  const json* owners = node_at(secret, "/metadata/ownerReferences");
  if (jobset.uid.empty() || owners == nullptr || !owners->is_array()) return false;
  return std::any_of(owners->begin(), owners->end(), [&](const json& owner) {
    return string_at(owner, "/kind") == "JobSet" && string_at(owner, "/uid") == jobset.uid;
  });
}

}  // namespace

Status check_secret_is_the_jobs(const std::string& body, const JobSetInfo& jobset, const std::string& ns) {
  json secret = json::parse(body, nullptr, false);
  std::string name = job_secret_name(jobset.name);
  if (!secret.is_object()) {  // a proxy's page, say: no Secret to judge
    return make_error(Exit::kData, "Secret {}/{}: the API's answer is not a JSON object: {}", ns, name,
                      truncate_utf8(body, 200, "..."));
  }
  std::vector<std::string> wrong;
  if (!owned_by(secret, jobset))
    wrong.push_back(fmt::format("metadata.ownerReferences has no JobSet of uid {}", jobset.uid));
  if (string_at(secret, "/metadata/labels/app.kubernetes.io~1managed-by") != kManagedBy)
    wrong.push_back(fmt::format("metadata.labels has no {}: {}", kManagedByLabel, kManagedBy));
  if (std::string type = string_at(secret, "/type"); type != kSecretType) {
    wrong.push_back(
        fmt::format("type is {}, not {}", dump_json(json(truncate_utf8(type, 64, "..."))), kSecretType));
  }
  if (wrong.empty()) return ok_status();
  return make_error(Exit::kNoPerm,
                    "Secret {}/{} exists but is not JobSet {}'s own ({}); whoever made it may hold its key, "
                    "so mpi-init does not adopt it. Delete it (kubectl delete secret -n {} {}) so that "
                    "mpi-init makes the job's own, or mount the job's key with --ssh-secret",
                    ns, name, jobset.name, fmt::join(wrong, "; "), ns, name);
}

Expected<KeyPair> key_from_secret_answer(const std::string& body, const std::string& where) {
  json secret = json::parse(body, nullptr, false);
  std::string encoded = string_at(secret, "/data/ssh-privatekey");
  if (encoded.empty()) {
    return make_error(Exit::kData,
                      "{} has no data.ssh-privatekey; delete it so that mpi-init makes it anew, "
                      "or pass --ssh-secret",
                      where);
  }
  TMPI_ASSIGN(std::string private_key, base64_decode(encoded, where));
  return key_pair_from_private(std::move(private_key), where);
}

std::string job_secret_name(const std::string& jobset) {
  return jobset + "-mpi-ssh";
}

Expected<JobSetInfo> get_jobset(KubeClient& client, const std::string& name, const Deadline& deadline) {
  const std::string& ns = client.config().namespace_;
  std::string path = fmt::format("/apis/jobset.x-k8s.io/v1alpha2/namespaces/{}/jobsets/{}", ns, name);
  TMPI_ASSIGN(KubeResponse response, client.call("GET", path, "", kGetJobSet, deadline));
  if (response.status == 404) {
    return make_error(Exit::kUsage,
                      "JobSet {} not found in namespace {} ({}); check --jobset and --namespace", name, ns,
                      client.config().origin);
  }
  return jobset_from_answer(name, response.body);
}

Expected<JobSetInfo> jobset_from_answer(const std::string& name, const std::string& body) {
  json jobset = json::parse(body, nullptr, false);
  JobSetInfo info;
  info.name = name;
  info.uid = string_at(jobset, "/metadata/uid");
  std::string subdomain = string_at(jobset, "/spec/network/subdomain", name);
  const json* found = node_at(jobset, "/spec/replicatedJobs");
  json jobs = found != nullptr && found->is_array() ? *found : json::array();
  if (jobs.empty() || info.uid.empty()) {
    // Say what came back: a proxy's page, or a 200 that is not the JobSet, is found at once.
    return make_error(
        Exit::kData,
        "JobSet {}: no metadata.uid or spec.replicatedJobs in the API's answer ({}); is --namespace "
        "or the API server's address right, and is nothing in between?",
        name,
        jobset.is_object() && !jobset.empty() ? "a JSON object without them"
                                              : "not a JSON object: " + truncate_utf8(body, 200, "..."));
  }
  for (const auto& job : jobs) {
    std::string group = string_at(job, "/name");
    auto replicas = int_at(job, "/replicas", 1), pods = int_at(job, "/template/spec/parallelism", 1);
    constexpr std::int64_t kMaxHosts = 100000;  // the API's answer is outside input: bounded
    auto left = kMaxHosts - static_cast<std::int64_t>(info.expected_hosts.size());
    if (replicas < 0 || pods < 0 || (pods > 0 && replicas > left / pods)) {
      return make_error(
          Exit::kData,
          "JobSet {}: replicated job {} asks for {} x {} pods; mpi-init handles at most {} hosts", name,
          truncate_utf8(group, 64, "..."), replicas, pods, kMaxHosts);
    }
    for (std::int64_t j = 0; j < replicas; ++j) {
      for (std::int64_t p = 0; p < pods; ++p) {
        info.expected_hosts.push_back(fmt::format("{}-{}-{}-{}.{}", name, group, j, p, subdomain));
      }
    }
  }
  info.expected_pods = static_cast<int>(info.expected_hosts.size());
  return info;
}

Expected<Topology> wait_for_pods(KubeClient& client, const SourceOptions& options, const JobSetInfo& jobset,
                                 const WaitOptions& wait, const Deadline& deadline) {
  const std::string& ns = client.config().namespace_;
  std::string base = fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}&limit={}", ns,
                                 url_encode("jobset.sigs.k8s.io/jobset-name=" + jobset.name), wait.page_size);
  Backoff backoff(Millis(500), Millis(5000));
  auto last_progress = Clock::now() - wait.progress_every;
  while (true) {
    PodListReader reader(options);
    std::string next;
    int pages = 0;
    do {
      std::string path = next.empty() ? base : base + "&continue=" + url_encode(next);
      TMPI_ASSIGN(KubeResponse page, client.call("GET", path, "", kListPods, deadline));
      if (page.status != 200) {
        return make_error(Exit::kUsage, "list pods in namespace {}: HTTP {}: {}", ns, page.status,
                          truncate_utf8(page.body, 200));
      }
      TMPI_ASSIGN(next,
                  reader.add(page.body, fmt::format("pods of JobSet {} (page {})", jobset.name, ++pages)));
    } while (!next.empty());

    auto live = reader.live_hosts();
    int ready = 0;
    for (const auto& [name, address] : live) ready += address.empty() ? 0 : 1;
    if (ready >= jobset.expected_pods) return reader.topology(fmt::format("pods of JobSet {}", jobset.name));

    std::vector<std::string> missing;
    for (const auto& name : jobset.expected_hosts) {
      auto it = live.find(name);
      if (it == live.end())
        missing.push_back(name + " (no pod)");
      else if (it->second.empty())
        missing.push_back(name + " (no IP yet)");
    }
    std::string summary = fmt::format(
        "{}/{} pods ready; missing: {}", ready, jobset.expected_pods,
        missing.empty() ? "(more pods than the JobSet names)" : fmt::format("{}", fmt::join(missing, ", ")));
    Millis pause = backoff.next();
    if (deadline.remaining() <= pause) {
      return make_error(Exit::kTempFail,
                        "pods of JobSet {} not ready after {} s: {}; raise {}, or "
                        "check why they are not scheduled (kubectl describe pod)",
                        jobset.name, deadline.budget().count() / 1000, summary,
                        env_name(param::kWaitTimeout.name));
    }
    if (Clock::now() - last_progress >= wait.progress_every) {
      spdlog::info("waiting for pods: {}", summary);
      last_progress = Clock::now();
    }
    std::this_thread::sleep_for(pause);
  }
}

Expected<KeyPair> ensure_job_secret(KubeClient& client, const JobSetInfo& jobset, const Deadline& deadline) {
  const std::string& ns = client.config().namespace_;
  std::string name = job_secret_name(jobset.name);
  std::string where = fmt::format("Secret {}/{}", ns, name);
  std::string path = fmt::format("/api/v1/namespaces/{}/secrets/{}", ns, name);
  TMPI_ASSIGN(KubeResponse existing, client.call("GET", path, "", kGetSecret, deadline));
  if (existing.status == 200) {
    TMPI_CHECK(check_secret_is_the_jobs(existing.body, jobset, ns));
    spdlog::info("using the job key of {}", where);
    return key_from_secret_answer(existing.body, where);
  }
  TMPI_ASSIGN(KeyPair key, generate_ed25519());
  // No blockOwnerDeletion: it would need update rights on jobsets/finalizers.
  json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"labels", {{"jobset.sigs.k8s.io/jobset-name", jobset.name}, {kManagedByLabel, kManagedBy}}},
        {"ownerReferences", json::array({{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                                          {"kind", "JobSet"},
                                          {"name", jobset.name},
                                          {"uid", jobset.uid}}})}}},
      {"type", kSecretType},
      {"immutable", true},
      {"data",
       {{"ssh-privatekey", base64_encode(key.private_key)},
        {"ssh-publickey", base64_encode(key.public_line + "\n")}}}};
  TMPI_ASSIGN(KubeResponse created, client.call("POST", fmt::format("/api/v1/namespaces/{}/secrets", ns),
                                                dump_json(secret), kCreateSecret, deadline));
  if (created.status == 409) {  // another launcher (a restart) made it first: use theirs, if it is
    TMPI_ASSIGN(KubeResponse again, client.call("GET", path, "", kGetSecret, deadline));
    if (again.status != 200)
      return make_error(Exit::kTempFail, "{}: created by another launcher, then gone (HTTP {})", where,
                        again.status);
    TMPI_CHECK(check_secret_is_the_jobs(again.body, jobset, ns));
    spdlog::info("{} was created meanwhile; using its key", where);
    return key_from_secret_answer(again.body, where);
  }
  if (created.status == 404) return make_error(Exit::kUsage, "create {}: namespace {} not found", where, ns);
  spdlog::info("created {} (immutable, owned by JobSet {})", where, jobset.name);
  return key;
}

}  // namespace tmpi::init

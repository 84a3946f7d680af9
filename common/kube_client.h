// A Kubernetes API client for what trainer-mpi needs (list pods, get a JobSet, get or
// create a Secret, and later Events): configuration from inside a pod (service account)
// or from KUBECONFIG, and one call() with the API's retry rules:
//   - 429 and 5xx are retried with backoff, honouring Retry-After;
//   - transport failures and stalls (a per-request timeout) are retried the same way;
//   - 401 and 403 fail at once, naming the RBAC rule that is missing;
//   - everything runs under the caller's one deadline (Exit::kTempFail when it passes).
// The bearer token file is re-read on every call (projected tokens rotate) and never logged.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/error.h"
#include "common/http_client.h"

namespace tmpi {

struct KubeConfig {
  std::string server;      // https://host:port
  std::string namespace_;  // the pod's own namespace, or the context's
  std::string token;       // kubeconfig token
  std::string token_file;  // service account token (re-read on each call)
  TlsConfig tls;
  std::string origin;  // "service account in DIR" or the kubeconfig path, for messages
};

// In a pod: KUBERNETES_SERVICE_HOST/PORT and the files in sa_dir. Elsewhere: KUBECONFIG
// (its current context). `namespace_override` wins over both when set.
Expected<KubeConfig> load_kube_config(const std::map<std::string, std::string>& env,
                                      const std::string& sa_dir, const std::string& namespace_override);

// What a call does, for RBAC hints: "list pods", "create secrets", ...
struct KubeAction {
  std::string verb;      // get, list, create
  std::string group;     // "" for core, "jobset.x-k8s.io"
  std::string resource;  // pods, secrets, jobsets
};

struct KubeResponse {
  long status = 0;
  std::string body;  // the object, or a metav1.Status, as sent (a pod list is streamed)
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// The answer's parts that call() reads, pure so that a fuzzer reaches them. The message of a
// metav1.Status error body, or the body's first 200 bytes when it is not one:
std::string api_status_message(const std::string& body);
// The wait before the next try: `backoff`, or Retry-After's whole seconds when longer (at
// most 99999 s; an HTTP date or any other text is ignored).
Millis retry_after_wait(const std::string& header, Millis backoff);

// The most of one object's answer (a JobSet, a TrainJob, a Secret) that is read. etcd takes
// no request over 1.5 MiB at its default `--max-request-bytes` (etcd's dev-guide/limit.md),
// so no object the API stores is larger; 4 MiB leaves room for the API's JSON around it. A
// list of pods is not one object: it keeps HttpRequest's bound.
inline constexpr std::size_t kOneObjectMaxBody = std::size_t{4} << 20;

class KubeClient {
 public:
  // `max_body`: the most of an answer that is read (HttpRequest::max_body); past it the call
  // fails with Exit::kData and the answer's memory is not held.
  KubeClient(KubeConfig config, Millis request_timeout, std::size_t max_body = HttpRequest{}.max_body);

  // Returns 2xx, 404 and 409 answers to the caller; retries what is worth retrying until
  // `deadline`; any other answer is an Error that quotes the API's Status message. A PATCH
  // names its type (application/apply-patch+yaml for a server-side apply).
  Expected<KubeResponse> call(const std::string& method, const std::string& path, const std::string& body,
                              const KubeAction& action, const Deadline& deadline,
                              const std::string& content_type = "application/json");

  const KubeConfig& config() const { return config_; }

 private:
  Expected<std::string> bearer_token() const;

  KubeConfig config_;
  Millis request_timeout_;
  std::size_t max_body_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace tmpi

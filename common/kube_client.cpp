// See kube_client.h. Kubeconfig support covers what debugging needs: the current context's
// server, namespace, CA (file or data), and a token, token file or client certificate.
#include "common/kube_client.h"

#include <thread>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "common/files.h"
#include "common/params.h"
#include "common/utf8.h"

namespace tmpi {

namespace {

std::string trim_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// Only maps are indexed and only scalars read: yaml-cpp throws on a subscript of a scalar
// (a KUBECONFIG that points at a token file) and on a conversion of a map; an empty value
// ("namespace:") is null, and reads as absent, not as the text "null".
std::string text_of(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap()) return "";
  YAML::Node value = node[key];
  return value && value.IsScalar() ? value.Scalar() : "";
}

YAML::Node named(const YAML::Node& list, const std::string& name) {
  if (!list || !list.IsSequence()) return {};
  for (const auto& item : list) {
    if (item.IsMap() && !name.empty() && text_of(item, "name") == name) return item;
  }
  return {};
}

YAML::Node member(const YAML::Node& node, const char* key) {
  return node && node.IsMap() ? node[key] : YAML::Node{};
}

Expected<KubeConfig> read_kubeconfig(const std::string& path);

// Any shape that yaml-cpp still refuses is the file's error (65), named, never an
// internal one.
Expected<KubeConfig> from_kubeconfig(const std::string& path) {
  try {
    return read_kubeconfig(path);
  } catch (const YAML::Exception& e) {
    return make_error(Exit::kData, "KUBECONFIG {}: {}; fix the file or unset KUBECONFIG", path, e.what());
  }
}

Expected<KubeConfig> read_kubeconfig(const std::string& path) {
  YAML::Node doc = YAML::LoadFile(path);
  if (!doc.IsMap()) {
    return make_error(Exit::kData,
                      "KUBECONFIG {}: not a kubeconfig (a YAML map with contexts, clusters, users)", path);
  }
  KubeConfig config;
  config.origin = "kubeconfig " + path;
  std::string context_name = text_of(doc, "current-context");
  YAML::Node context = member(named(doc["contexts"], context_name), "context");
  if (!context || !context.IsMap()) {
    return make_error(Exit::kData, "KUBECONFIG {}: no context '{}'; set current-context", path, context_name);
  }
  YAML::Node cluster = member(named(doc["clusters"], text_of(context, "cluster")), "cluster");
  YAML::Node user = member(named(doc["users"], text_of(context, "user")), "user");
  if (!cluster || !cluster.IsMap())
    return make_error(Exit::kData, "KUBECONFIG {}: context '{}' names no known cluster", path, context_name);
  config.server = text_of(cluster, "server");
  config.namespace_ = text_of(context, "namespace");
  config.tls.ca_file = text_of(cluster, "certificate-authority");
  TMPI_ASSIGN(config.tls.ca_data,
              base64_decode(text_of(cluster, "certificate-authority-data"), "certificate-authority-data"));
  if (YAML::Node insecure = member(cluster, "insecure-skip-tls-verify"); insecure) {
    if (!insecure.IsScalar() || !YAML::convert<bool>::decode(insecure, config.tls.insecure)) {
      return make_error(Exit::kData, "KUBECONFIG {}: insecure-skip-tls-verify is not true or false", path);
    }
  }
  if (user && user.IsMap()) {
    config.token = text_of(user, "token");
    config.token_file = text_of(user, "tokenFile");
    config.tls.cert_file = text_of(user, "client-certificate");
    config.tls.key_file = text_of(user, "client-key");
    TMPI_ASSIGN(config.tls.cert_data,
                base64_decode(text_of(user, "client-certificate-data"), "client-certificate-data"));
    TMPI_ASSIGN(config.tls.key_data, base64_decode(text_of(user, "client-key-data"), "client-key-data"));
  }
  if (config.server.empty()) return make_error(Exit::kData, "KUBECONFIG {}: the cluster has no server", path);
  return config;
}

// The hint for a 401 or 403: the Role rule the service account needs.
std::string rbac_hint(const KubeAction& action, const std::string& ns) {
  return fmt::format(
      "grant the pod's service account a Role in namespace {} with rule "
      "{{apiGroups: [\"{}\"], resources: [\"{}\"], verbs: [\"{}\"]}} (see examples/rbac.yaml)",
      ns, action.group, action.resource, action.verb);
}

}  // namespace

std::string api_status_message(const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    return parsed["message"].get<std::string>();
  }
  return truncate_utf8(body, 200);
}

Millis retry_after_wait(const std::string& header, Millis backoff) {
  if (!header.empty() && header.find_first_not_of("0123456789") == std::string::npos && header.size() < 6) {
    return std::max(backoff, Millis(std::stol(header) * 1000));
  }
  return backoff;
}

Expected<KubeConfig> load_kube_config(const std::map<std::string, std::string>& env,
                                      const std::string& sa_dir, const std::string& namespace_override) {
  KubeConfig config;
  auto host = env.find("KUBERNETES_SERVICE_HOST");
  auto kubeconfig = env.find("KUBECONFIG");
  if (host != env.end() && !host->second.empty()) {
    auto port = env.find("KUBERNETES_SERVICE_PORT");
    std::string address =
        host->second.find(':') != std::string::npos ? "[" + host->second + "]" : host->second;
    config.server = fmt::format("https://{}:{}", address, port != env.end() ? port->second : "443");
    config.token_file = sa_dir + "/token";
    config.tls.ca_file = sa_dir + "/ca.crt";
    config.origin = "service account in " + sa_dir;
    if (auto ns = read_file(sa_dir + "/namespace"); ns) config.namespace_ = trim_newlines(*ns);
    if (!file_exists(config.token_file)) {
      return make_error(Exit::kUsage,
                        "in a pod, but {} is missing; mount the service account token "
                        "(automountServiceAccountToken: true)",
                        config.token_file);
    }
  } else if (kubeconfig != env.end() && !kubeconfig->second.empty()) {
    std::string path = kubeconfig->second.substr(0, kubeconfig->second.find(':'));
    TMPI_ASSIGN(config, from_kubeconfig(path));
  } else {
    return make_error(Exit::kUsage,
                      "no Kubernetes API: not in a pod (KUBERNETES_SERVICE_HOST is unset) and no "
                      "KUBECONFIG; use --pods, --hostfile or --replicated-jobs instead");
  }
  if (!namespace_override.empty()) config.namespace_ = namespace_override;
  if (config.namespace_.empty()) config.namespace_ = "default";
  return config;
}

KubeClient::KubeClient(KubeConfig config, Millis request_timeout, std::size_t max_body)
    : config_(std::move(config)),
      request_timeout_(request_timeout),
      max_body_(max_body),
      http_(std::make_unique<HttpClient>(config_.tls)) {}

Expected<std::string> KubeClient::bearer_token() const {
  if (!config_.token_file.empty()) {
    TMPI_ASSIGN(std::string token, read_file(config_.token_file, 64 * 1024));
    return trim_newlines(std::move(token));
  }
  return config_.token;
}

Expected<KubeResponse> KubeClient::call(const std::string& method, const std::string& path,
                                        const std::string& body, const KubeAction& action,
                                        const Deadline& deadline, const std::string& content_type) {
  Backoff backoff(Millis(250), Millis(5000));
  std::string last_problem;
  int tries = 0;
  while (true) {
    ++tries;
    HttpRequest request;
    request.method = method;
    request.url = config_.server + path;
    request.body = body;
    request.timeout = std::max(Millis(100), std::min(request_timeout_, deadline.remaining()));
    request.max_body = max_body_;
    request.headers = {"Accept: application/json", "Content-Type: " + content_type};
    TMPI_ASSIGN(std::string token, bearer_token());
    if (!token.empty()) request.headers.push_back("Authorization: Bearer " + token);
    auto response = http_->send(request);
    Millis wait = backoff.next();
    if (!response) {
      // An answer past the bound would be as large on the next try: said at once.
      if (response.error().exit == Exit::kData) return response.take_error();
      last_problem = response.error().message;
    } else {
      long status = response->status;
      if ((status >= 200 && status < 300) || status == 404 || status == 409) {
        return KubeResponse{status, std::move(response->body)};
      }
      std::string message = api_status_message(response->body);
      if (status == 401 || status == 403) {
        return make_error(Exit::kNoPerm, "{} {} {} in namespace {}: HTTP {} ({}); {}", action.verb,
                          action.resource, path, config_.namespace_, status, message,
                          rbac_hint(action, config_.namespace_));
      }
      if (status != 429 && status < 500) {
        return make_error(Exit::kData, "{} {}: HTTP {}: {}", method, path, status, message);
      }
      last_problem = fmt::format("HTTP {}: {}", status, message);
      wait = retry_after_wait(response->retry_after, wait);
    }
    if (deadline.remaining() <= wait) {
      return make_error(Exit::kTempFail,
                        "{} {} failed {} times in {} s; last: {}; check the API server, or raise {}", method,
                        path, tries, deadline.budget().count() / 1000, last_problem,
                        env_name(param::kWaitTimeout.name));
    }
    spdlog::debug("{} {}: {}; retrying in {} ms", method, path, last_problem, wait.count());
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace tmpi

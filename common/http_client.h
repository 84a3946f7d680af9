// A small HTTPS client on libcurl, for the Kubernetes API and the Trainer status server.
// One request, one answer: retries, backoff and deadlines belong to the caller (see
// kube_client.h), which knows which answers are worth retrying. Headers given here (a
// bearer token) are never logged.
#pragma once

#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/error.h"

namespace tmpi {

struct TlsConfig {
  std::string ca_file, ca_data;      // PEM; the data form comes from a kubeconfig
  std::string cert_file, cert_data;  // client certificate (kubeconfig users)
  std::string key_file, key_data;
  bool insecure = false;  // kubeconfig insecure-skip-tls-verify: tests only
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  Millis timeout{10000};             // the whole exchange; a stalled server ends here
  std::string local_address;         // bind to this source address (tests, load generators)
  // The most of an answer's body that is read: past it the request fails (Exit::kData), so
  // that a server or a proxy that answers without end cannot take this process's memory.
  // The default holds the largest pod list page; callers whose answers are small ask less.
  std::size_t max_body = std::size_t{256} << 20;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, when the server sent one
};

class HttpClient {
 public:
  explicit HttpClient(TlsConfig tls);
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  ~HttpClient();

  // A transport failure (refused, reset, timed out, TLS) is an Error with Exit::kTempFail
  // for time-outs and Exit::kUsage otherwise; any HTTP status is a response.
  Expected<HttpResponse> send(const HttpRequest& request);

 private:
  TlsConfig tls_;
  void* curl_;  // CURL*, reused so that connections are kept alive
};

std::string url_encode(std::string_view text);
std::string base64_encode(std::string_view bytes);
// Standard alphabet, padding optional; an Error names `what` when the text is not base64.
Expected<std::string> base64_decode(std::string_view text, std::string_view what);

}  // namespace tmpi

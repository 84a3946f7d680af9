// See http_client.h. The handle is reused across requests, so curl keeps the connection
// alive (the API server is asked many times while pods come up).
#include "common/http_client.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include <curl/curl.h>

#include "common/utf8.h"

namespace tmpi {

namespace {

struct BodySink {
  std::string* body;
  std::size_t max;
  bool over = false;
};

// Returning less than was given ends the transfer (CURLE_WRITE_ERROR).
std::size_t collect_body(char* data, std::size_t size, std::size_t count, void* out) {
  auto* sink = static_cast<BodySink*>(out);
  std::size_t bytes = size * count;
  if (bytes > sink->max - std::min(sink->max, sink->body->size())) {
    sink->over = true;
    return 0;
  }
  sink->body->append(data, bytes);
  return bytes;
}

std::size_t collect_header(char* data, std::size_t size, std::size_t count, void* out) {
  std::string_view line(data, size * count);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    std::string lower(line.substr(0, kName.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kName) {
      std::string_view value = line.substr(kName.size());
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.remove_suffix(1);
      *static_cast<std::string*>(out) = std::string(value);
    }
  }
  return size * count;
}

void set_blob(CURL* curl, CURLoption option, const std::string& data) {
  curl_blob blob{const_cast<char*>(data.data()), data.size(), CURL_BLOB_COPY};
  curl_easy_setopt(curl, option, &blob);
}

}  // namespace

HttpClient::HttpClient(TlsConfig tls) : tls_(std::move(tls)) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

namespace {

bool carries_credential(const std::vector<std::string>& headers) {
  constexpr std::string_view kName = "authorization:";
  for (const auto& header : headers) {
    if (header.size() < kName.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < kName.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(header[i])) == kName[i];
    }
    if (same) return true;
  }
  return false;
}

}  // namespace

Expected<HttpResponse> HttpClient::send(const HttpRequest& request) {
  // A credential travels only over TLS, whoever built the request: a bearer token on a plain
  // http:// URL (a KUBECONFIG's server, KUBEFLOW_TRAINER_SERVER_URL) would cross the network
  // in clear text. The URL is named without its query; the token never is.
  if (carries_credential(request.headers) && request.url.rfind("https://", 0) != 0) {
    return make_error(Exit::kUsage,
                      "refusing to send a bearer token to {} over plain http: give an https:// URL (the "
                      "KUBECONFIG server, or KUBEFLOW_TRAINER_SERVER_URL)",
                      truncate_utf8(request.url.substr(0, request.url.find('?')), 200, "..."));
  }
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);
  HttpResponse response;
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<long>(request.timeout.count(), 5000)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect_body);
  BodySink sink{&response.body, request.max_body};
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response.retry_after);
  if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  }
  std::string interface = "host!" + request.local_address;
  if (!request.local_address.empty()) curl_easy_setopt(curl, CURLOPT_INTERFACE, interface.c_str());
  curl_slist* headers = nullptr;
  for (const auto& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!tls_.ca_file.empty() || !tls_.ca_data.empty()) {
    // A pinned CA is the only one trusted: not also the system's store (Debian's libcurl
    // looks in /etc/ssl/certs by default).
    curl_easy_setopt(curl, CURLOPT_CAPATH, nullptr);
  }
  if (!tls_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, tls_.ca_file.c_str());
  if (!tls_.ca_data.empty()) set_blob(curl, CURLOPT_CAINFO_BLOB, tls_.ca_data);
  if (!tls_.cert_file.empty()) curl_easy_setopt(curl, CURLOPT_SSLCERT, tls_.cert_file.c_str());
  if (!tls_.cert_data.empty()) set_blob(curl, CURLOPT_SSLCERT_BLOB, tls_.cert_data);
  if (!tls_.key_file.empty()) curl_easy_setopt(curl, CURLOPT_SSLKEY, tls_.key_file.c_str());
  if (!tls_.key_data.empty()) set_blob(curl, CURLOPT_SSLKEY_BLOB, tls_.key_data);
  if (tls_.insecure) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (sink.over) {
    return make_error(Exit::kData,
                      "{} {}: the answer passed {} bytes, the most this request reads; a server or proxy "
                      "that answers without end? (for a pod list, a smaller --api-page-size)",
                      request.method, truncate_utf8(request.url.substr(0, request.url.find('?')), 200, "..."),
                      request.max_body);
  }
  if (code != CURLE_OK) {
    Exit exit = code == CURLE_OPERATION_TIMEDOUT ? Exit::kTempFail : Exit::kUnavailable;
    return make_error(exit, "{} {}: {}", request.method, request.url, curl_easy_strerror(code));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string url_encode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    unsigned value = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) value |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) value |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(value >> 18) & 63];
    out += kAlphabet[(value >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(value >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[value & 63] : '=';
  }
  return out;
}

Expected<std::string> base64_decode(std::string_view text, std::string_view what) {
  std::string out;
  unsigned value = 0;
  int bits = 0;
  for (char c : text) {
    int digit = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
    if (c == '=' || c == '\n' || c == '\r') continue;
    if (digit < 0) return make_error(Exit::kData, "{} is not base64 (found '{}')", what, c);
    value = (value << 6) | static_cast<unsigned>(digit);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((value >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace tmpi

// The client plumbing: base64 and URL encoding, backoff with jitter under a deadline, and
// Kubernetes configuration from a kubeconfig or a service account.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/http_client.h"
#include "common/kube_client.h"

namespace tmpi {
namespace {

TEST(Encoding, Base64RoundTripsAndRejectsJunk) {
  for (const std::string& text :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = base64_decode(base64_encode(text), "test");
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(base64_encode("hello"), "aGVsbG8=");
  auto junk = base64_decode("aGV*bG8=", "data[ssh-privatekey]");
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().message.find("data[ssh-privatekey]"), std::string::npos);
}

TEST(HttpClient, RefusesABearerTokenOverPlainHttp) {
  // Port 9 on loopback: were the request sent, the error would be a refused connection.
  HttpClient client{TlsConfig{}};
  HttpRequest request;
  request.method = "POST";
  request.url = "http://127.0.0.1:9/apis/trainer.kubeflow.org/v1alpha1/status?token=no";
  request.headers = {"Content-Type: application/json", "authorization: Bearer s3cr3t-token"};
  request.timeout = std::chrono::milliseconds(500);
  auto sent = client.send(request);
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().exit, Exit::kUsage);
  EXPECT_NE(sent.error().message.find("over plain http: give an https:// URL"), std::string::npos)
      << sent.error().message;
  EXPECT_EQ(sent.error().message.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(sent.error().message.find("token=no"), std::string::npos);
  request.headers.pop_back();  // no credential: plain http is the caller's choice
  auto plain = client.send(request);
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().message.find("plain http"), std::string::npos) << plain.error().message;
}

// A server that answers more than the request reads (8 MiB against 1 MiB here; on a cluster,
// a proxy that never ends): the client stops at the bound with an error that says so, and
// names the URL without its query.
// A server on loopback that answers its first request with 200 and `chunks` × 64 KiB of
// body, then closes; the port it listens on is `port`.
class EndlessAnswer {
 public:
  explicit EndlessAnswer(int chunks) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_ = bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
             listen(listener_, 1) == 0;
    socklen_t length = sizeof address;
    bound_ = bound_ && getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0;
    port = ntohs(address.sin_port);
    server_ = std::thread([this, chunks] {
      int peer = accept(listener_, nullptr, nullptr);
      if (peer < 0) return;
      std::string request(4096, '\0');
      (void)recv(peer, request.data(), request.size(), 0);
      std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
      std::string chunk(64 * 1024, ' ');
      bool sent = send(peer, head.data(), head.size(), MSG_NOSIGNAL) > 0;
      for (int i = 0; sent && i < chunks; ++i)
        sent = send(peer, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0;
      close(peer);
    });
  }
  // The client's connection must be closed first, so that the server's last send fails.
  void join() {
    if (server_.joinable()) server_.join();
    close(listener_);
  }
  ~EndlessAnswer() {
    if (server_.joinable()) shutdown(listener_, SHUT_RDWR);
    join();
  }
  EndlessAnswer(const EndlessAnswer&) = delete;
  EndlessAnswer& operator=(const EndlessAnswer&) = delete;
  bool bound() const { return bound_; }
  unsigned short port = 0;

 private:
  int listener_ = -1;
  bool bound_ = false;
  std::thread server_;
};

TEST(HttpClient, AnAnswerPastItsBoundIsAnErrorNotMemory) {
  EndlessAnswer server(128);
  ASSERT_TRUE(server.bound());
  Expected<HttpResponse> answer = make_error(Exit::kSoftware, "not sent");
  {
    HttpClient client{TlsConfig{}};
    HttpRequest request;
    request.url = fmt::format("http://127.0.0.1:{}/api/v1/namespaces/a/pods?limit=500", server.port);
    request.max_body = std::size_t{1} << 20;
    request.timeout = std::chrono::milliseconds(10000);
    answer = client.send(request);
  }
  server.join();
  ASSERT_FALSE(answer) << "a body of " << answer->body.size() << " bytes was read";
  EXPECT_EQ(answer.error().exit, Exit::kData);
  EXPECT_NE(answer.error().message.find("/api/v1/namespaces/a/pods: the answer passed 1048576 bytes"),
            std::string::npos)
      << answer.error().message;
  EXPECT_EQ(answer.error().message.find("limit=500"), std::string::npos);
}

// A client made for single objects (the in-place agent's JobSet) stops reading at
// kOneObjectMaxBody: 8 MiB from a hostile or broken API server is refused, not held; the
// same answer within the default bound would have been read whole.
TEST(KubeClient, AClientOfOneObjectReadsNoMoreThanAnObjectCanBe) {
  EndlessAnswer server(128);
  ASSERT_TRUE(server.bound());
  KubeConfig config;
  config.server = fmt::format("http://127.0.0.1:{}", server.port);
  config.namespace_ = "team-a";
  Expected<KubeResponse> answer = make_error(Exit::kSoftware, "not sent");
  {
    KubeClient client(config, std::chrono::milliseconds(10000), kOneObjectMaxBody);
    answer = client.call("GET", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets/train", "",
                         {"get", "jobset.x-k8s.io", "jobsets"}, Deadline(std::chrono::milliseconds(10000)));
  }
  server.join();
  ASSERT_FALSE(answer) << "a body of " << answer->body.size() << " bytes was read";
  EXPECT_EQ(answer.error().exit, Exit::kData);
  EXPECT_NE(answer.error().message.find(fmt::format("the answer passed {} bytes", kOneObjectMaxBody)),
            std::string::npos)
      << answer.error().message;
}

TEST(Encoding, UrlEncodeKeepsUnreservedOnly) {
  EXPECT_EQ(url_encode("jobset.sigs.k8s.io/jobset-name=a b"), "jobset.sigs.k8s.io%2Fjobset-name%3Da%20b");
}

TEST(Backoff, JitteredDoublingUpToTheCap) {
  Backoff backoff(Millis(100), Millis(800));
  std::vector<std::pair<long, long>> bounds = {{50, 100}, {100, 200}, {200, 400}, {400, 800}, {400, 800}};
  for (auto [low, high] : bounds) {
    long wait = backoff.next().count();
    EXPECT_GE(wait, low);
    EXPECT_LE(wait, high);
  }
}

TEST(Backoff, DeadlineCountsDown) {
  Deadline deadline(Millis(50));
  EXPECT_FALSE(deadline.expired());
  EXPECT_LE(deadline.remaining().count(), 50);
  Deadline past(Millis(0));
  EXPECT_TRUE(past.expired());
  EXPECT_EQ(past.remaining().count(), 0);
}

TEST(Backoff, DeadlineCountsDownOnAnInjectedClock) {
  ManualClock clock;
  Deadline deadline(Millis(50), clock);
  EXPECT_FALSE(deadline.expired());
  EXPECT_EQ(deadline.remaining().count(), 50);  // exactly: the manual time has not moved
  clock.advance(Millis(20));
  EXPECT_EQ(deadline.remaining().count(), 30);
  Deadline copy = deadline;  // a copy reads the same clock
  clock.advance(Millis(30));
  EXPECT_TRUE(deadline.expired());
  EXPECT_TRUE(copy.expired());
  EXPECT_EQ(deadline.remaining().count(), 0);
  EXPECT_EQ(deadline.budget().count(), 50);
}

class KubeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / "tmpi-kube-XXXXXX";
    dir_ = mkdtemp(dir_.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(KubeConfigTest, KubeconfigCurrentContext) {
  ASSERT_TRUE(write_atomic(dir_ + "/config", R"(apiVersion: v1
kind: Config
current-context: b
contexts:
- {name: a, context: {cluster: one, user: u}}
- {name: b, context: {cluster: two, user: u, namespace: team-b}}
clusters:
- {name: one, cluster: {server: "https://one:6443"}}
- {name: two, cluster: {server: "https://two:6443", certificate-authority-data: aGVsbG8=}}
users:
- {name: u, user: {token: secret-token}}
)"));
  auto config = load_kube_config({{"KUBECONFIG", dir_ + "/config"}}, "/nonexistent", "");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->server, "https://two:6443");
  EXPECT_EQ(config->namespace_, "team-b");
  EXPECT_EQ(config->tls.ca_data, "hello");
  EXPECT_EQ(config->token, "secret-token");
  auto overridden = load_kube_config({{"KUBECONFIG", dir_ + "/config"}}, "/nonexistent", "other");
  ASSERT_TRUE(overridden);
  EXPECT_EQ(overridden->namespace_, "other");
}

TEST_F(KubeConfigTest, ServiceAccountInAPod) {
  ASSERT_TRUE(write_atomic(dir_ + "/token", "t"));
  ASSERT_TRUE(write_atomic(dir_ + "/namespace", "team-a\n"));
  auto config = load_kube_config(
      {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}, dir_, "");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->namespace_, "team-a");
  EXPECT_EQ(config->tls.ca_file, dir_ + "/ca.crt");
  auto ipv6 = load_kube_config({{"KUBERNETES_SERVICE_HOST", "fd00::1"}}, dir_, "");
  ASSERT_TRUE(ipv6);
  EXPECT_EQ(ipv6->server, "https://[fd00::1]:443");
}

TEST_F(KubeConfigTest, ClearErrors) {
  auto none = load_kube_config({}, dir_, "");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("--pods"), std::string::npos);
  auto no_token = load_kube_config({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}}, dir_ + "/missing", "");
  ASSERT_FALSE(no_token);
  EXPECT_NE(no_token.error().message.find("automountServiceAccountToken"), std::string::npos);
  ASSERT_TRUE(write_atomic(dir_ + "/bad", "current-context: nope\ncontexts: []\n"));
  auto bad = load_kube_config({{"KUBECONFIG", dir_ + "/bad"}}, dir_, "");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no context 'nope'"), std::string::npos);
}

// A KUBECONFIG of another shape is the file's error (65, its path named), never an internal
// one: yaml-cpp throws on a subscript of a scalar and on a conversion of a map.
TEST_F(KubeConfigTest, AnyShapeIsTheFilesErrorNamed) {
  const std::string cluster = "clusters: [{name: k, cluster: {server: 'https://k:6443'}}]\n";
  for (const std::string& text : {
           std::string("just-a-token\n"),
           std::string("- a\n- b\n"),
           "current-context: [a]\ncontexts: [{name: a, context: {cluster: k}}]\n" + cluster,
           "current-context: c\ncontexts: [{name: c, context: 7}]\n" + cluster,
           std::string("current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
                       "clusters: [{name: k, cluster: {server: 'https://k:6443', insecure-skip-tls-verify: "
                       "maybe}}]\n"),
       }) {
    ASSERT_TRUE(write_atomic(dir_ + "/odd", text));
    auto config = load_kube_config({{"KUBECONFIG", dir_ + "/odd"}}, dir_, "");
    ASSERT_FALSE(config) << text;
    EXPECT_EQ(config.error().exit, Exit::kData) << text << config.error().message;
    EXPECT_NE(config.error().message.find(dir_ + "/odd"), std::string::npos) << config.error().message;
  }
  // An empty value is absent, not the text "null"; a user of another shape is no user.
  ASSERT_TRUE(write_atomic(dir_ + "/odd",
                           "current-context: c\n"
                           "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
                           "    namespace:\n" +
                               cluster + "users:\n- name: u\n  user: 5\n"));
  auto config = load_kube_config({{"KUBECONFIG", dir_ + "/odd"}}, dir_, "");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->server, "https://k:6443");
  EXPECT_EQ(config->namespace_, "default") << "an empty namespace is none (then the default), not \"null\"";
  EXPECT_EQ(config->token, "");
}

// What call() reads of an error answer: a metav1.Status's message (a proxy's page instead,
// cut at 200 bytes), and Retry-After's whole seconds when longer than the backoff, up to
// 99999 s; an HTTP date, a sign or a longer number leaves the backoff as it was.
TEST(KubeAnswer, StatusMessageAndRetryAfter) {
  EXPECT_EQ(api_status_message(R"({"kind":"Status","message":"pods is forbidden","code":403})"),
            "pods is forbidden");
  EXPECT_EQ(api_status_message(R"({"kind":"Status","message":5})"), R"({"kind":"Status","message":5})");
  EXPECT_EQ(api_status_message(std::string(300, 'x')), std::string(200, 'x'));
  EXPECT_EQ(retry_after_wait("3", Millis(250)), Millis(3000));
  EXPECT_EQ(retry_after_wait("0", Millis(250)), Millis(250));
  EXPECT_EQ(retry_after_wait("99999", Millis(250)), Millis(99999000));
  for (const char* ignored : {"", "100000", "-5", "+5", "Wed, 21 Oct 2026 07:28:00 GMT", "3 "}) {
    EXPECT_EQ(retry_after_wait(ignored, Millis(250)), Millis(250)) << ignored;
  }
}

}  // namespace
}  // namespace tmpi

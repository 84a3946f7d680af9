// The coordinator over real sockets on 127.0.0.1, port 0: many client threads register
// and beat, each from its own loopback address (its host name is that address, so the
// "name resolves to the peer" check runs for real); malformed, oversized and silent
// clients get 400 or are cut off without stalling anyone else; at the connection cap a
// stranger's idle connection makes room, a key holder's never does.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_client.h"
#include "common/proof.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kSocketKey = derive_rendezvous_key("job key for the socket test");

class Running {
 public:
  Running(int hosts, ServerLimits limits = {}) {
    CoordinatorConfig config;
    for (int i = 0; i < hosts; ++i)
      config.hosts.push_back(fmt::format("127.0.{}.{}", 1 + i / 200, 2 + i % 200));
    config.key = kSocketKey;
    CoordinatorCallbacks callbacks;
    callbacks.barrier_open = [this] { opened_ = true; };
    service_ = std::make_unique<CoordinatorService>(io_, config, callbacks, limits);
    port_ = *service_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Running() {
    io_.stop();
    thread_.join();
  }
  unsigned short port() const { return port_; }
  bool opened() const { return opened_; }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<CoordinatorService> service_;
  unsigned short port_ = 0;
  std::atomic<bool> opened_{false};
  std::thread thread_;
};

long post(HttpClient& client, unsigned short port, const std::string& from, const std::string& target,
          const json& body, json* answer = nullptr) {
  HttpRequest request;
  request.method = "POST";
  request.url = fmt::format("http://127.0.0.1:{}{}", port, target);
  request.body = body.dump();
  request.local_address = from;
  auto response = client.send(request);
  if (!response) return -1;
  if (answer != nullptr) *answer = json::parse(response->body, nullptr, false);
  return response->status;
}

json register_body(const std::string& host) {
  return json::parse(signed_body(kSocketKey, Registration{host, 1, 0, true, "", kVersion, random_nonce()}));
}

TEST(RendezvousSockets, ManyClientThreadsRegisterAndBeat) {
  constexpr int kHostCount = 64, kThreads = 8;
  Running coordinator(kHostCount);
  std::atomic<int> accepted{0}, beats{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client{TlsConfig{}};
      for (int i = t; i < kHostCount; i += kThreads) {
        std::string host = fmt::format("127.0.{}.{}", 1 + i / 200, 2 + i % 200);
        if (post(client, coordinator.port(), host, "/v1/register", register_body(host)) == 200) ++accepted;
        json beat = json::parse(signed_body(kSocketKey, Beat{host, 1}));
        if (post(client, coordinator.port(), host, "/v1/beat", beat) == 200) ++beats;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted.load(), kHostCount);
  EXPECT_EQ(beats.load(), kHostCount);
  EXPECT_TRUE(coordinator.opened());
  HttpClient client{TlsConfig{}};
  auto hosts = client.send(
      HttpRequest{"GET", fmt::format("http://127.0.0.1:{}/v1/hosts", coordinator.port()), "", {}, 2s, ""});
  ASSERT_TRUE(hosts);
  EXPECT_EQ(json::parse(hosts->body)["ready"], kHostCount);
}

TEST(RendezvousSockets, ANameThatResolvesElsewhereIsRefused) {
  Running coordinator(2);
  HttpClient client{TlsConfig{}};
  json answer;
  // 127.0.1.3 claims to be 127.0.1.2.
  EXPECT_EQ(
      post(client, coordinator.port(), "127.0.1.3", "/v1/register", register_body("127.0.1.2"), &answer),
      403);
  EXPECT_NE(answer["error"].get<std::string>().find("does not resolve to the sender's address 127.0.1.3"),
            std::string::npos);
}

// What came back on a raw connection, and whether the server ended it: an empty answer
// alone cannot tell a server that closed the connection from one that is merely slow.
struct Exchange {
  std::string bytes;
  bool closed = false;  // end of stream or reset from the server, before our read timeout
};

// Sends raw bytes on a new connection; reads until the server closes it or `wait` passes.
Exchange raw_exchange(unsigned short port, const std::string& bytes, std::chrono::milliseconds wait) {
  Exchange out;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    out.bytes = "connect failed";
    return out;
  }
  if (!bytes.empty()) (void)!write(fd, bytes.data(), bytes.size());
  timeval timeout{static_cast<long>(wait.count() / 1000), static_cast<long>(wait.count() % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char buffer[4096];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.bytes.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    out.closed = n == 0 || errno == ECONNRESET;  // EAGAIN: our timeout, the server still holds it
    break;
  }
  close(fd);
  return out;
}

TEST(RendezvousSockets, MalformedOversizedAndSilentClientsDoNotStallTheLoop) {
  ServerLimits limits;
  limits.header_timeout = 300ms;
  limits.body_bytes = 1024;
  Running coordinator(1, limits);
  EXPECT_NE(raw_exchange(coordinator.port(), "GARBAGE\r\n\r\n", 2s).bytes.find("400"), std::string::npos);
  std::string big = fmt::format("POST /v1/register HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{}",
                                std::string(5000, 'a'));
  EXPECT_NE(raw_exchange(coordinator.port(), big, 2s).bytes.find("400"), std::string::npos);
  auto start = Clock::now();
  std::thread silent([&] {
    Exchange cut = raw_exchange(coordinator.port(), "", 5s);
    EXPECT_TRUE(cut.closed) << "the server never closed the silent connection";
    EXPECT_EQ(cut.bytes, "");
  });
  // While a silent client holds a connection, others are served at once.
  HttpClient client{TlsConfig{}};
  auto health = client.send(
      HttpRequest{"GET", fmt::format("http://127.0.0.1:{}/healthz", coordinator.port()), "", {}, 1s, ""});
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  silent.join();
  EXPECT_LT(Clock::now() - start, 3s) << "the silent client was not cut off at the header deadline";
}

// A connection to 127.0.0.1 that has sent `request`, read its answer's first bytes, and is
// kept open (keep-alive): -1 if it could not connect.
int held_connection(unsigned short port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  if (!request.empty()) {
    (void)!write(fd, request.data(), request.size());
    timeval timeout{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char buffer[1024];
    (void)!read(fd, buffer, sizeof buffer);
  }
  return fd;
}

// Whether the server has closed fd (a read sees the end, not our 300 ms timeout).
bool closed_by_server(int fd) {
  timeval timeout{0, 300000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char byte = 0;
  ssize_t n = read(fd, &byte, 1);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

TEST(RendezvousSockets, AtTheCapTheOldestIdleStrangerMakesRoomAndAKeyHolderNeverDoes) {
  ServerLimits limits;
  limits.max_connections = 2;
  Running coordinator(1, limits);
  const std::string health = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  int oldest = held_connection(coordinator.port(), health);
  std::this_thread::sleep_for(50ms);
  int younger = held_connection(coordinator.port(), health);
  ASSERT_GE(oldest, 0);
  ASSERT_GE(younger, 0);
  std::this_thread::sleep_for(100ms);
  // A third keyless connection is served; the least recently active one made room for it.
  EXPECT_NE(raw_exchange(coordinator.port(), health, 1s).bytes.find("200 OK"), std::string::npos);
  EXPECT_TRUE(closed_by_server(oldest)) << "the oldest idle connection was not the one evicted";
  EXPECT_FALSE(closed_by_server(younger));
  close(oldest);
  close(younger);
  // Two key holders' connections (a signed challenge each, kept alive) fill the cap: a
  // stranger's new connection is refused, and neither of theirs is evicted for it.
  std::this_thread::sleep_for(100ms);
  int proven[2];
  for (int& fd : proven) {
    std::string body = signed_body(kSocketKey, Hello{random_nonce()});
    fd = held_connection(
        coordinator.port(),
        fmt::format("POST /v1/hello HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", body.size(), body));
    ASSERT_GE(fd, 0);
  }
  std::this_thread::sleep_for(100ms);
  Exchange extra = raw_exchange(coordinator.port(), health, 1s);
  EXPECT_TRUE(extra.closed) << "the connection over a cap of key holders was left open";
  EXPECT_EQ(extra.bytes, "");
  for (int fd : proven) {
    EXPECT_FALSE(closed_by_server(fd)) << "a key holder's connection was evicted";
    close(fd);
  }
}

}  // namespace
}  // namespace tmpi::rdv

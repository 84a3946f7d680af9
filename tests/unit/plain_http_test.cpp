// plain_http (common/plain_http.h) against a one-answer server on the loopback: an IPv4
// literal, a bracketed IPv6 literal and a name each reach it; an address without a usable
// port is refused before any connection, naming the address.
#include "common/plain_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace tmpi {
namespace {

using namespace std::chrono_literals;

// Listens on the loopback of `family`, answers one request with 200 and its first line.
class OneAnswer {
 public:
  explicit OneAnswer(int family) {
    listener_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage address{};
    socklen_t size = 0;
    if (family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = in6addr_loopback;
      size = sizeof *v6;
    } else {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      size = sizeof *v4;
    }
    listening_ = listener_ >= 0 && bind(listener_, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
                 listen(listener_, 4) == 0 &&
                 getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size) == 0;
    port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                     : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    if (listening_) thread_ = std::thread([this] { serve(); });
  }
  ~OneAnswer() {
    shutdown(listener_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(listener_);
  }
  OneAnswer(const OneAnswer&) = delete;
  OneAnswer& operator=(const OneAnswer&) = delete;
  bool listening() const { return listening_; }
  int port() const { return port_; }

 private:
  void serve() {
    int peer = accept(listener_, nullptr, nullptr);
    if (peer < 0) return;
    std::string seen;
    char buffer[4096];
    while (seen.find("\r\n\r\n") == std::string::npos) {
      ssize_t got = read(peer, buffer, sizeof buffer);
      if (got <= 0) break;
      seen.append(buffer, static_cast<std::size_t>(got));
    }
    std::string line = seen.substr(0, seen.find("\r\n"));
    std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(line.size()) +
                         "\r\nConnection: close\r\n\r\n" + line;
    [[maybe_unused]] ssize_t sent = write(peer, answer.data(), answer.size());
    close(peer);
  }
  int listener_ = -1;
  bool listening_ = false;
  int port_ = 0;
  std::thread thread_;
};

TEST(PlainHttp, AnIpv4LiteralIsReached) {
  OneAnswer server(AF_INET);
  ASSERT_TRUE(server.listening());
  auto got = plain_http("GET", "127.0.0.1:" + std::to_string(server.port()), "/v1/x", "", 5000ms);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, "GET /v1/x HTTP/1.1");
}

// A lookup of "[::1]" would fail: the literal is connected to as it is.
TEST(PlainHttp, ABracketedIpv6LiteralIsReached) {
  OneAnswer server(AF_INET6);
  ASSERT_TRUE(server.listening()) << "the loopback has no ::1";
  auto got = plain_http("GET", "[::1]:" + std::to_string(server.port()), "/v1/y", "", 5000ms);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->body, "GET /v1/y HTTP/1.1");
}

TEST(PlainHttp, ANameIsLookedUp) {
  OneAnswer server(AF_INET);
  ASSERT_TRUE(server.listening());
  auto got = plain_http("GET", "localhost:" + std::to_string(server.port()), "/v1/z", "", 5000ms);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->body, "GET /v1/z HTTP/1.1");
}

TEST(PlainHttp, AnAddressWithoutAUsablePortIsRefusedByName) {
  for (std::string address : {"10.0.0.5", "10.0.0.5:0", "10.0.0.5:65536", "10.0.0.5:80x", "[fd00::5]:"}) {
    auto got = plain_http("GET", address, "/", "", 100ms);
    ASSERT_FALSE(got) << address;
    EXPECT_EQ(got.error().exit, Exit::kUsage) << address;
    EXPECT_NE(got.error().message.find(address), std::string::npos) << got.error().message;
  }
}

}  // namespace
}  // namespace tmpi

// Both address families, over real sockets on 127.0.0.1 and ::1. The listeners (the
// coordinator, the sidecar's /readyz) bind "::" by default with IPV6_V6ONLY off, so that an
// IPv6-only or an IPv6-first dual-stack pod (whose address the kubelet probes and the agents
// are given) is served as an IPv4 one is; where the pod has no IPv6 at all they fall back to
// 0.0.0.0. The fallback is tried in a child whose IPv6 sockets a seccomp filter refuses
// with EAFNOSUPPORT, as a kernel booted with ipv6.disable=1 does.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_client.h"
#include "common/proof.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {
namespace {

// One GET of /readyz to the loopback address of `family`: the status code, or 0.
int get_over(int family, unsigned short port) {
  int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_storage address{};
  socklen_t length = 0;
  if (family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    v6->sin6_addr = in6addr_loopback;
    length = sizeof *v6;
  } else {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    length = sizeof *v4;
  }
  std::string request = "GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  char buffer[256] = {0};
  timeval timeout{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  bool sent = connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
              send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0;
  ssize_t got = sent ? recv(fd, buffer, sizeof buffer - 1, 0) : 0;
  close(fd);
  return got >= 12 ? std::atoi(buffer + 9) : 0;
}

// A /readyz server (on port 0: any) that notes each caller's address.
class Probe {
 public:
  Probe()
      : server_(io_, [this](const Call& call, const Respond& respond) {
          std::lock_guard lock(mutex_);
          peers_.push_back(call.peer);
          respond({200, "ready\n", "text/plain"});
        }) {}
  ~Probe() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  Expected<unsigned short> start(const std::string& address, unsigned short port_wanted = 0) {
    auto port = server_.listen(address, port_wanted);
    if (port) thread_ = std::thread([this] { io_.run(); });
    return port;
  }
  std::string listening_on() const { return server_.listening_on(); }
  std::vector<std::string> peers() {
    std::lock_guard lock(mutex_);
    return peers_;
  }

 private:
  boost::asio::io_context io_;
  HttpServer server_;
  std::mutex mutex_;
  std::vector<std::string> peers_;
  std::thread thread_;
};

TEST(DualStack, TheDefaultListenerServesBothFamilies) {
  Probe probe;
  auto port = probe.start("::");
  ASSERT_TRUE(port) << port.error().message;
  EXPECT_EQ(probe.listening_on(), "::");
  EXPECT_EQ(get_over(AF_INET6, *port), 200) << "an IPv6 probe (::1) was not answered";
  EXPECT_EQ(get_over(AF_INET, *port), 200) << "an IPv4 probe (127.0.0.1) was not answered";
  // IPv4 callers reach "::" v4-mapped: the coordinator compares peers with what host names
  // resolve to, so they must read as plain IPv4.
  EXPECT_EQ(probe.peers(), (std::vector<std::string>{"::1", "127.0.0.1"}));
}

TEST(DualStack, AnIPv4ListenerStaysIPv4) {
  Probe probe;
  auto port = probe.start("0.0.0.0");
  ASSERT_TRUE(port) << port.error().message;
  EXPECT_EQ(probe.listening_on(), "0.0.0.0");
  EXPECT_EQ(get_over(AF_INET, *port), 200);
  EXPECT_EQ(get_over(AF_INET6, *port), 0) << "--listen-address 0.0.0.0 asked for IPv4 only";
}

TEST(DualStack, APortTakenIsAnErrorNotAFallback) {
  Probe holder;
  auto port = holder.start("0.0.0.0");
  ASSERT_TRUE(port) << port.error().message;
  Probe second;
  auto taken = second.start("::", *port);
  ASSERT_FALSE(taken) << "[::] was bound beside 0.0.0.0 on the same port";
  EXPECT_EQ(taken.error().exit, Exit::kUnavailable);
  EXPECT_NE(taken.error().message.find(fmt::format("[::]:{}", *port)), std::string::npos)
      << taken.error().message;
}

#if defined(__x86_64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_AARCH64;
#endif

// From now on in this process, socket(AF_INET6, ...) fails with EAFNOSUPPORT.
bool refuse_ipv6_sockets() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // the low half (little-endian)
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

TEST(DualStack, APodWithoutIPv6FallsBackToIPv4) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!refuse_ipv6_sockets()) _exit(10);
    int v6 = socket(AF_INET6, SOCK_STREAM, 0);
    if (v6 >= 0 || errno != EAFNOSUPPORT) _exit(11);  // the filter must hold for the test to say anything
    Probe probe;
    auto port = probe.start("::");
    if (!port) _exit(12);
    if (probe.listening_on() != "0.0.0.0") _exit(13);
    _exit(get_over(AF_INET, *port) == 200 ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no seccomp; 11: IPv6 sockets not refused; 12: no listener; "
                                       "13: not on 0.0.0.0; 14: not served over IPv4";
}

// The rendezvous over both families: a host named by its IPv6 address registers from it,
// and one named by its IPv4 address from that, on one coordinator at the default address.
TEST(DualStack, HostsRegisterOverEitherFamily) {
  const std::string key = derive_rendezvous_key("job key for the dual-stack test");
  boost::asio::io_context io;
  CoordinatorConfig config;
  config.hosts = {"::1", "127.0.0.1"};
  config.key = key;
  std::atomic<bool> opened{false};
  CoordinatorCallbacks callbacks;
  callbacks.barrier_open = [&] { opened = true; };
  CoordinatorService service(io, config, callbacks);
  auto port = service.listen("::", 0);
  ASSERT_TRUE(port) << port.error().message;
  std::thread thread([&] { io.run(); });
  HttpClient client{TlsConfig{}};
  for (const std::string host : {"::1", "127.0.0.1"}) {
    HttpRequest request;
    request.method = "POST";
    std::string literal = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    request.url = fmt::format("http://{}:{}/v1/register", literal, *port);
    request.body = signed_body(key, Registration{host, 1, 0, true, "", kVersion, random_nonce()});
    auto response = client.send(request);
    ASSERT_TRUE(response) << host << ": " << response.error().message;
    EXPECT_EQ(response->status, 200) << host << ": " << response->body;
  }
  for (int i = 0; i < 100 && !opened; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(opened) << "the barrier did not open with both hosts registered";
  io.stop();
  thread.join();
}

}  // namespace
}  // namespace tmpi::rdv

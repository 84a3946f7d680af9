// A flood of keyless connections against a real coordinator on loopback, under a lowered
// RLIMIT_NOFILE so that its cap is small and the flood cheap. A child process, forked before
// any thread, holds idle keep-alive connections from four loopback addresses, more than the
// cap, and reopens each one the server closes, as the flood seen in the field did. Meanwhile
// a host registers and beats, signed, each on a new connection as the rank agents' beats
// come: every one must be answered, and no host may be named lost.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_client.h"
#include "common/proof.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {
namespace {

using namespace std::chrono_literals;

const std::string kFloodKey = derive_rendezvous_key("job key for the flood test");
constexpr const char* kFloodHost = "127.0.0.5";  // the job's one host: its name is its address

std::size_t open_descriptors() {
  std::size_t count = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (dir != nullptr && readdir(dir) != nullptr) ++count;
  if (dir != nullptr) closedir(dir);
  return count;
}

// A keep-alive connection from `from` that has asked for /healthz once and then idles.
int idle_connection(const char* from, unsigned short port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in source{}, target{};
  source.sin_family = target.sin_family = AF_INET;
  inet_pton(AF_INET, from, &source.sin_addr);
  inet_pton(AF_INET, "127.0.0.1", &target.sin_addr);
  target.sin_port = htons(port);
  bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source);
  connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target);  // EINPROGRESS: in the backlog
  pollfd writable{fd, POLLOUT, 0};
  poll(&writable, 1, 1000);
  const char request[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)!send(fd, request, sizeof request - 1, MSG_NOSIGNAL);
  return fd;
}

// The child: holds `count` connections, reopening each that the server closes, until the
// parent closes `until` (or 20 s pass). Single-threaded (forked before any thread started).
[[noreturn]] void flood(unsigned short port, int count, int ready, int until) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;  // the child's own descriptors are not the coordinator's
  setrlimit(RLIMIT_NOFILE, &limit);
  const char* from[] = {"127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24"};
  std::vector<pollfd> fds(static_cast<std::size_t>(count) + 1);
  for (int i = 0; i < count; ++i) fds[i] = {idle_connection(from[i % 4], port), POLLIN, 0};
  fds[count] = {until, POLLIN, 0};
  (void)!write(ready, "r", 1);
  auto deadline = std::chrono::steady_clock::now() + 20s;
  char sink[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    if (poll(fds.data(), fds.size(), 100) < 0 || fds[count].revents != 0) break;
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, sink, sizeof sink);
      if (n > 0) continue;  // an answer to its one request: it stays, idle
      close(fds[i].fd);     // closed by the server: taken again at once
      fds[i].fd = idle_connection(from[i % 4], port);
    }
  }
  _exit(0);
}

long post(const std::string& target, unsigned short port, const std::string& body) {
  HttpClient client{TlsConfig{}};  // one per request: a new connection, as the agents make
  HttpRequest request{"POST", fmt::format("http://127.0.0.1:{}{}", port, target), body, {}, 2s, kFloodHost};
  auto response = client.send(request);
  return response ? response->status : -1;
}

std::string get(const std::string& target, unsigned short port) {
  HttpClient client{TlsConfig{}};
  auto response =
      client.send(HttpRequest{"GET", fmt::format("http://127.0.0.1:{}{}", port, target), "", {}, 2s, ""});
  return response ? response->body : "";
}

TEST(Flood, KeylessConnectionsBeyondTheCapDoNotKeepASignedBeatOut) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = open_descriptors() + 160;  // a cap of about 100 connections (less 64)
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::atomic<int> lost{0};
  boost::asio::io_context io;
  CoordinatorConfig config;
  config.hosts = {kFloodHost};
  config.key = kFloodKey;
  config.lost_after = 1000ms;
  CoordinatorCallbacks callbacks;
  callbacks.host_lost = [&](const std::string&, const std::string&) { ++lost; };
  CoordinatorService service(io, config, callbacks);
  unsigned short port = *service.listen("127.0.0.1", 0);
  const int flood_size = static_cast<int>(service.server().max_connections()) * 2;
  int ready[2], until[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(until), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(until[1]);  // else the child never sees the parent's end of it close
    flood(port, flood_size, ready[1], until[0]);
  }
  close(until[0]);
  std::thread loop([&] { io.run(); });
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the flood never started";
  std::this_thread::sleep_for(300ms);  // the server takes the backlog: every slot is the flood's
  EXPECT_EQ(post(kRegisterPath, port,
                 signed_body(kFloodKey, Registration{kFloodHost, 1, 0, true, "", kVersion, random_nonce()})),
            200);
  int answered = 0;
  for (int seq = 1; seq <= 15; ++seq) {
    answered += post(kBeatPath, port, signed_body(kFloodKey, Beat{kFloodHost, seq})) == 200 ? 1 : 0;
    std::this_thread::sleep_for(100ms);
  }
  std::string metrics = get("/metrics", port);
  int lost_while_flooded = lost.load();
  close(until[1]);
  waitpid(child, nullptr, 0);
  io.stop();
  loop.join();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(answered, 15) << "signed beats were kept out by the flood";
  EXPECT_EQ(lost_while_flooded, 0) << "a healthy host was named lost during the flood";
  // The flood did fill the cap: the server made room for the beats by evicting its connections.
  EXPECT_EQ(metrics.find("tmpi_rendezvous_connections_evicted_total 0\n"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace tmpi::rdv

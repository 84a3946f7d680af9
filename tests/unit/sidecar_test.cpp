// The sidecar's loop against a real coordinator on 127.0.0.1: it waits for a coordinator
// that is not up yet, registers (here with no sshd, so sshReady=false and the reason),
// registers again when the coordinator restarts and forgets it, exits 0 when the job
// ends, and gives up with exit 3 and the reason at its deadline.
#include "rendezvous/sidecar.h"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "common/proof.h"
#include "initcontainer/ssh_identity.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/http_server.h"

namespace tmpi::rdv {
namespace {

using namespace std::chrono_literals;

// A real key, so that the sidecar's ssh probe gets as far as the (absent) sshd.
const std::string kPrivateKey = init::generate_ed25519()->private_key;

class Coordinator1 {
 public:
  explicit Coordinator1(unsigned short port) {
    CoordinatorConfig config;
    config.hosts = {"127.0.0.1"};
    config.key = derive_rendezvous_key(kPrivateKey);
    config.beat_interval = 100ms;
    service_ = std::make_unique<CoordinatorService>(io_, config, CoordinatorCallbacks{});
    auto bound = service_->listen("127.0.0.1", port);
    EXPECT_TRUE(bound) << bound.error().message;
    port_ = bound ? *bound : 0;
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Coordinator1() {
    io_.stop();
    thread_.join();
  }
  unsigned short port() const { return port_; }
  // Runs fn on the coordinator's thread and waits for it.
  template <typename Fn>
  auto on_loop(Fn fn) {
    std::promise<decltype(fn(service_->engine()))> done;
    boost::asio::post(io_, [&] { done.set_value(fn(service_->engine())); });
    return done.get_future().get();
  }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<CoordinatorService> service_;
  unsigned short port_ = 0;
  std::thread thread_;
};

unsigned short free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

SidecarOptions options_for(unsigned short port) {
  SidecarOptions options;
  options.host = "127.0.0.1";
  options.coordinator = fmt::format("127.0.0.1:{}", port);
  options.private_key = kPrivateKey;
  options.ssh_port = 1;  // nothing listens: the probe reports why
  options.deadline = 10s;
  return options;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds within = 5s) {
  auto end = Clock::now() + within;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

TEST(Sidecar, WaitsRegistersReRegistersAfterARestartAndExitsOnTheEnd) {
  unsigned short port = free_port();
  Sidecar sidecar(options_for(port));
  auto result = std::async(std::launch::async, [&] { return sidecar.run(); });
  std::this_thread::sleep_for(300ms);  // the coordinator is not up yet
  {
    Coordinator1 first(port);
    ASSERT_TRUE(eventually([&] {
      return first.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").address; }) == "127.0.0.1";
    }));
    std::string reason = first.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").reason; });
    EXPECT_NE(reason.find("no sshd on 127.0.0.1:1"), std::string::npos) << "reason: " << reason;
    EXPECT_FALSE(sidecar.ssh_ready());
  }
  Coordinator1 second(port);  // a restarted launcher knows nobody
  ASSERT_TRUE(eventually([&] {
    return second.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").address; }) == "127.0.0.1";
  })) << "the sidecar did not register again after the restart";
  second.on_loop([](Coordinator& c) {
    c.end_job();
    return 0;
  });
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready) << "the sidecar did not exit after the end";
  Status status = result.get();
  EXPECT_TRUE(status) << status.error().message;
}

TEST(Sidecar, LeavingIsToldAtOnceAndEndsTheLoop) {
  unsigned short port = free_port();
  Coordinator1 coordinator(port);
  SidecarOptions options = options_for(port);
  Sidecar sidecar(options);
  auto result = std::async(std::launch::async, [&] { return sidecar.run(); });
  ASSERT_TRUE(eventually([&] {
    return coordinator.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").address; }) ==
           "127.0.0.1";
  }));
  auto since = Clock::now();
  sidecar.leave();  // what SIGTERM calls, from the probe server's thread
  ASSERT_EQ(result.wait_for(2s), std::future_status::ready) << "the loop did not end after leaving";
  EXPECT_LT(Clock::now() - since, 1500ms);
  Status status = result.get();
  EXPECT_TRUE(status) << status.error().message;
  // Before the barrier the host waits again, free for a new pod, with the reason.
  auto [address, reason] = coordinator.on_loop([](Coordinator& c) {
    const auto& host = c.hosts().at("127.0.0.1");
    return std::make_pair(host.address, host.reason);
  });
  EXPECT_EQ(address, "");
  EXPECT_NE(reason.find("its pod is being deleted"), std::string::npos) << reason;
  EXPECT_NE(coordinator.on_loop([](Coordinator& c) { return c.metrics(); })
                .find("tmpi_rendezvous_departures_total 1"),
            std::string::npos);
}

TEST(Sidecar, GivesUpAtItsDeadlineWithTheReason) {
  auto options = options_for(free_port());
  options.deadline = 1s;
  Sidecar sidecar(options);
  auto start = Clock::now();
  Status status = sidecar.run();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().exit, Exit::kTempFail);
  EXPECT_NE(status.error().message.find("gave up after 1 s without the coordinator"), std::string::npos)
      << status.error().message;
  EXPECT_LT(Clock::now() - start, 4s);
}

// Whatever answers at the coordinator's address (a proxy's 503 page before the launcher
// listens, a 200 that is not a JSON object, fields of the wrong type), the sidecar keeps
// trying and ends by its deadline with a reason that shows what came; it never throws or
// aborts (an uncaught type_error on its thread was std::terminate).
TEST(Sidecar, ReplyThatIsNotAJsonObjectIsRetriedAndNamed) {
  boost::asio::io_context io;
  int calls = 0;
  HttpServer impostor(io, [&](const Call&, const Respond& respond) {
    static const Reply kReplies[] = {
        {503, "<html><body>Service Unavailable</body></html>", "text/html"},
        {200, "[1, 2]", "application/json"},
        {200, R"({"beatMillis": "soon", "jobEnded": "yes", "error": 7})", "application/json"},
        {502, "", "text/plain"}};
    respond(kReplies[calls++ % 4]);
  });
  auto port = impostor.listen("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().message;
  std::thread loop([&] { io.run(); });
  auto options = options_for(*port);
  options.deadline = 1500ms;
  Sidecar sidecar(options);
  Status status = sidecar.run();
  io.stop();
  loop.join();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().exit, Exit::kTempFail);
  EXPECT_GE(calls, 2);
  EXPECT_NE(status.error().message.find("HTTP "), std::string::npos) << status.error().message;
}

}  // namespace
}  // namespace tmpi::rdv

// The sidecar's loop against a real coordinator on 127.0.0.1: it waits for a coordinator
// that is not up yet, registers (here with no sshd, so sshReady=false and the reason),
// registers again when the coordinator restarts and forgets it, exits 0 when the job
// ends, and gives up with exit 3 and the reason at its deadline.
//
// The requests go over real sockets, in real time; the sidecar's backoffs, beats, probe
// intervals and deadline pass on a manual clock (common/clock.h), whose autopilot moves it
// to the next deadline whenever the sidecar and the test's thread (when it waits on the
// clock too) are asleep on it: no test sleeps for them.
#include "rendezvous/sidecar.h"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "common/clock.h"
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

// Polls pred between pauses on the manual clock, for `within` of its time.
template <typename Pred>
bool eventually(ManualClock& clock, Pred pred, std::chrono::milliseconds within = 5s) {
  auto end = clock.now() + within;
  while (clock.now() < end) {
    if (pred()) return true;
    clock.sleep_for(20ms);
  }
  return pred();
}

// run() on a thread of its own, which leaves the clock's autopilot when it ends; stopped
// when the test ends, even by a failed assertion, since on a manual clock that nobody moves
// its deadline would never come.
struct Running {
  Running(Sidecar& which, ManualClock& clock)
      : sidecar(which), result(std::async(std::launch::async, [&which, &clock] {
          Status status = which.run();
          clock.depart();
          return status;
        })) {}
  ~Running() {
    sidecar.stop();
    if (result.valid()) result.wait();
  }
  bool ended() const { return result.wait_for(0s) == std::future_status::ready; }
  Sidecar& sidecar;
  std::future<Status> result;
};

TEST(Sidecar, WaitsRegistersReRegistersAfterARestartAndExitsOnTheEnd) {
  ManualClock clock;
  clock.autopilot(2);  // the sidecar's thread and this one
  unsigned short port = free_port();
  Sidecar sidecar(options_for(port), clock);
  Running running(sidecar, clock);
  clock.sleep_for(300ms);  // the coordinator is not up yet
  {
    Coordinator1 first(port);
    ASSERT_TRUE(eventually(clock, [&] {
      return first.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").address; }) == "127.0.0.1";
    }));
    std::string reason = first.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").reason; });
    EXPECT_NE(reason.find("no sshd on 127.0.0.1:1"), std::string::npos) << "reason: " << reason;
    EXPECT_FALSE(sidecar.ssh_ready());
  }
  Coordinator1 second(port);  // a restarted launcher knows nobody
  ASSERT_TRUE(eventually(clock, [&] {
    return second.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").address; }) == "127.0.0.1";
  })) << "the sidecar did not register again after the restart";
  second.on_loop([](Coordinator& c) {
    c.end_job();
    return 0;
  });
  ASSERT_TRUE(eventually(clock, [&] { return running.ended(); })) << "the sidecar did not exit after the end";
  Status status = running.result.get();
  EXPECT_TRUE(status) << status.error().message;
}

// leave() itself is timed on the real clock: it must end a nap at once, whatever the clock.
TEST(Sidecar, LeavingIsToldAtOnceAndEndsTheLoop) {
  ManualClock clock;
  clock.autopilot(2);
  unsigned short port = free_port();
  Coordinator1 coordinator(port);
  SidecarOptions options = options_for(port);
  Sidecar sidecar(options, clock);
  Running running(sidecar, clock);
  ASSERT_TRUE(eventually(clock, [&] {
    return coordinator.on_loop([](Coordinator& c) { return c.hosts().at("127.0.0.1").address; }) ==
           "127.0.0.1";
  }));
  auto since = Clock::now();
  sidecar.leave();  // what SIGTERM calls, from the probe server's thread
  ASSERT_EQ(running.result.wait_for(2s), std::future_status::ready) << "the loop did not end after leaving";
  EXPECT_LT(Clock::now() - since, 1500ms);
  Status status = running.result.get();
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
  ManualClock clock;
  clock.autopilot(1);  // the sidecar's thread, this one
  Sidecar sidecar(options, clock);
  auto start = clock.now();
  Status status = sidecar.run();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().exit, Exit::kTempFail);
  EXPECT_NE(status.error().message.find("gave up after 1 s without the coordinator"), std::string::npos)
      << status.error().message;
  EXPECT_LT(clock.now() - start, 4s);
}

// Whatever answers at the coordinator's address (a proxy's 503 page before the launcher
// listens, a 200 that is not a JSON object, fields of the wrong type), the sidecar keeps
// trying and ends by its deadline with a reason that shows what came; it never throws or
// aborts (an uncaught type_error on its thread was std::terminate).
TEST(Sidecar, ReplyThatIsNotAJsonObjectIsRetriedAndNamed) {
  ManualClock clock;
  clock.autopilot(1);  // the sidecar's thread, this one
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
  Sidecar sidecar(options, clock);
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

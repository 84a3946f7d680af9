// The rendezvous coordinator as mpi-launcher run embeds it: rdv::CoordinatorService on a
// thread of its own, its callbacks folded into Shared, which the launcher's main thread
// reads (under the mutex) as it waits for hosts and watches the job. Split from run.cpp so
// that the job's steps read in one place and the threading sits in another.
#pragma once

#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/json_fields.h"
#include "launcher/failure.h"
#include "launcher/job.h"
#include "launcher/options.h"
#include "launcher/preflight.h"
#include "rendezvous/coordinator_service.h"

namespace tmpi::launch {

// What the coordinator's callbacks learn, read by the main thread.
// A rank killed by a signal (SIGTERM, SIGKILL) was usually stopped by MPI because of
// something else (a lost daemon): it is only a secondary cause, kept in case nothing
// better explains the failure.
struct Shared {
  std::mutex mutex;
  bool barrier = false;
  std::optional<std::string> deadline;
  std::optional<Failure> failure;    // the first rank that failed on its own, or a lost host
  std::optional<Failure> secondary;  // the first rank that was killed by a signal
  int started = 0, exited = 0, failed = 0;
  // Ranks whose agents found them on another host than the hostfile's (agent/placement.h):
  // the preflight's table, printed once the job is stopped; kMaxMisplacedRows of them, and a count.
  std::vector<CheckRow> misplaced;
  int misplaced_count = 0;
};
inline constexpr std::size_t kMaxMisplacedRows = 64;

class JobRendezvous {
 public:
  JobRendezvous(const LauncherOptions& options, const Job& job, Shared& shared) {
    rdv::CoordinatorConfig config =
        rdv::coordinator_config(job.topology, job.private_key, options.rendezvous);
    config.epoch = job.epoch;       // the agents have it from their environment
    config.gated = job.start_gate;  // closed from the start: no agent can ask before it is
    config.np = job.plan.np;        // a report of a rank outside [0, np) is refused
    beat_ = config.beat_interval;
    rdv::CoordinatorCallbacks callbacks;
    // Without sidecars nothing registers: the wait says what it waits for (sshd), and the
    // coordinator only takes the agents' reports and beats.
    if (options.wait == WaitFor::kSidecar) {
      callbacks.progress = [](const std::string& line) { spdlog::info("rendezvous: {}", line); };
    }
    callbacks.refused = [](const std::string& what) { spdlog::warn("rendezvous: {}", what); };
    callbacks.barrier_open = [&shared] {
      std::lock_guard lock(shared.mutex);
      shared.barrier = true;
    };
    callbacks.deadline = [&shared](const std::string& summary) {
      std::lock_guard lock(shared.mutex);
      shared.deadline = summary;
    };
    callbacks.host_lost = [&shared](const std::string& host, const std::string& why) {
      std::lock_guard lock(shared.mutex);
      if (!shared.failure)
        shared.failure = Failure{static_cast<int>(Exit::kTempFail),
                                 fmt::format("host {} lost ({})", host, why), "HostLost"};
    };
    callbacks.rank_event = [&shared](const rdv::RankEvent& event) {
      std::lock_guard lock(shared.mutex);
      if (event.event == "start") ++shared.started;
      if (event.event == "misplaced") {
        ++shared.exited;
        ++shared.failed;
        if (shared.misplaced.size() < kMaxMisplacedRows)
          shared.misplaced.push_back(misplaced_row(event.rank, event.host, event.expected));
        if (++shared.misplaced_count == 1 && !shared.failure)
          shared.failure = Failure{static_cast<int>(Exit::kUnavailable),
                                   fmt::format("rank {} ran on {}, not on {} as the hostfile says",
                                               event.rank, event.host, event.expected),
                                   "RankMisplaced"};
        return;
      }
      if (event.event != "exit") return;
      ++shared.exited;
      if (event.code == 0) return;
      ++shared.failed;
      auto& slot = event.signal != 0 ? shared.secondary : shared.failure;
      if (slot) return;
      slot = Failure{event.code,
                     event.signal != 0 ? fmt::format("rank {} on {} was killed by signal {} after {:.0f} s",
                                                     event.rank, event.host, event.signal, event.seconds)
                                       : fmt::format("rank {} on {} exited with code {} after {:.0f} s",
                                                     event.rank, event.host, event.code, event.seconds),
                     "RankFailed", true};
      if (!event.tail.empty()) spdlog::error("rank {} stderr, last lines:\n{}", event.rank, event.tail);
    };
    service_ = std::make_unique<rdv::CoordinatorService>(io_, config, callbacks);
  }
  Status start(const LauncherOptions& options) {
    TMPI_CHECK(
        service_->listen(options.listen_address, static_cast<unsigned short>(options.job.rendezvous_port)));
    thread_ = std::thread([this] { io_.run(); });
    return ok_status();
  }
  // The address it listens on: "::", or "0.0.0.0" in a pod without IPv6 (http_server.h).
  std::string listening_on() const { return service_->server().listening_on(); }
  // The start gate's decision (agent/gate.h), once the ssh check beside the launch has ended.
  void open_gate() {
    boost::asio::post(io_, [this] { service_->engine().open_gate(); });
  }
  void stop_gate(const std::string& reason) {
    boost::asio::post(io_, [this, reason] { service_->engine().stop_gate(reason); });
  }
  // Tells the sidecars the job has ended, serves them two more beats, then stops.
  void finish(bool linger) {
    boost::asio::post(io_, [this] { service_->engine().end_job(); });
    if (linger) std::this_thread::sleep_for(beat_ * 2 + Millis(500));
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  nlohmann::json snapshot() {
    std::promise<nlohmann::json> done;
    boost::asio::post(io_, [&] {
      nlohmann::json hosts = parse_object(service_->engine().hosts_json(Clock::now()));
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& [rank, event] : service_->engine().ranks()) {
        ranks.push_back(rank_json(
            {rank, event.host, event.event != "start", event.code, event.signal, event.seconds, true}));
      }
      const nlohmann::json* rows = node_at(hosts, "/hosts");
      done.set_value({{"hosts", rows != nullptr ? *rows : nlohmann::json::array()}, {"ranks", ranks}});
    });
    return done.get_future().get();
  }
  ~JobRendezvous() { finish(false); }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<rdv::CoordinatorService> service_;
  std::thread thread_;
  Millis beat_{5000};
};

}  // namespace tmpi::launch

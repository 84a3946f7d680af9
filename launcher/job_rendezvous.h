// The rendezvous coordinator as mpi-launcher run embeds it: rdv::CoordinatorService on a
// thread of its own, its callbacks folded into Shared, which the launcher's main thread
// reads (under the mutex) as it waits for hosts and watches the job. Split from run.cpp so
// that the job's steps read in one place and the threading sits in another.
#pragma once

#include <algorithm>
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
#include "launcher/preflight.h"
#include "launcher/supervise.h"
#include "rendezvous/coordinator_service.h"

namespace tmpi::launch {

// The tally (supervise.h) as the coordinator's thread writes it and the main thread reads it.
struct Shared {
  std::mutex mutex;
  JobTally tally;
};

// What the embedded coordinator needs of the launcher's settings.
struct RendezvousOptions {
  rdv::RendezvousTimes times;  // --rendezvous-timeout, --beat-interval, --lost-after
  std::string listen_address;  // --listen-address
  int port = 0;                // --rendezvous-port
  // --wait sidecar: the sidecars register, and their progress is logged. Without sidecars
  // nothing registers: the wait says what it waits for (sshd), and the coordinator only
  // takes the agents' reports and beats.
  bool sidecars = true;
};

class JobRendezvous {
 public:
  JobRendezvous(const RendezvousOptions& options, const Job& job, Shared& shared)
      : listen_address_(options.listen_address), port_(options.port) {
    rdv::CoordinatorConfig config = rdv::coordinator_config(job.topology, job.private_key, options.times);
    config.epoch = job.epoch;       // the agents have it from their environment
    config.gated = job.start_gate;  // closed from the start: no agent can ask before it is
    config.np = job.plan.np;        // a report of a rank outside [0, np) is refused
    // Every host that runs ranks by the plan reports, or is named lost (coordinator.h): where
    // the ranks start together, as Open MPI starts them (none before every daemon is up) and
    // the start gate does; hydra's proxies with no gate start theirs as each one connects.
    const bool together = job.plan.flavour == Flavour::kOpenMpi4 || job.plan.flavour == Flavour::kOpenMpi5;
    if (job.placed_by_slot && (together || job.agents_ask)) {
      // One round of the slots is every host that gets a rank.
      int first_round = std::min(job.plan.np, job.topology.total_slots());
      for (const std::string& host : expected_placement(job.topology, first_round)) {
        if (config.ranked_hosts.empty() || config.ranked_hosts.back() != host)
          config.ranked_hosts.push_back(host);
      }
    }
    beat_ = config.beat_interval;
    rdv::CoordinatorCallbacks callbacks;
    if (options.sidecars) {
      callbacks.progress = [](const std::string& line) { spdlog::info("rendezvous: {}", line); };
    }
    callbacks.refused = [](const std::string& what) { spdlog::warn("rendezvous: {}", what); };
    callbacks.barrier_open = [&shared] {
      std::lock_guard lock(shared.mutex);
      shared.tally.barrier = true;
    };
    // On the coordinator's thread, in its tick: its hosts are read where they are written.
    callbacks.deadline = [this, &shared](const std::string& summary) {
      std::vector<MissingHost> missing;
      for (const auto& [name, entry] : service_->engine().hosts()) {
        if (entry.state == rdv::HostState::kReady || missing.size() >= kPodStatusHosts) continue;
        missing.push_back({name, entry.state != rdv::HostState::kWaiting, entry.reason});
      }
      std::lock_guard lock(shared.mutex);
      shared.tally.deadline = summary;
      shared.tally.missing = std::move(missing);
    };
    // A failure in the tally stops the job (Supervisor::step): the agents are answered so from
    // this very report on, before MPI's teardown has even begun (Coordinator::end_ranks).
    callbacks.host_lost = [this, &shared](const std::string& host, const std::string& why) {
      std::lock_guard lock(shared.mutex);
      record_host_lost(shared.tally, host, why);
      service_->engine().end_ranks();
    };
    callbacks.rank_event = [this, &shared](const rdv::RankEvent& event) {
      std::lock_guard lock(shared.mutex);
      if (record_rank_event(shared.tally, event) && !event.tail.empty())
        spdlog::error("rank {} stderr, last lines:\n{}", event.rank, event.tail);
      if (shared.tally.failure) service_->engine().end_ranks();
    };
    service_ = std::make_unique<rdv::CoordinatorService>(io_, config, callbacks);
  }
  Status start() {
    TMPI_CHECK(service_->listen(listen_address_, static_cast<unsigned short>(port_)));
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
  // The job is being stopped: the rank agents are told so at their next word (a SIGCONT, the
  // first step of Open MPI's teardown of a rank, makes each ask at once: agent/agent.h).
  void end_ranks() {
    boost::asio::post(io_, [this] { service_->engine().end_ranks(); });
  }
  // Tells the sidecars the job has ended, serves them two more beats, then stops.
  void finish(bool linger) {
    if (closed_) return;
    boost::asio::post(io_, [this] { service_->engine().end_job(); });
    if (linger) std::this_thread::sleep_for(beat_ * 2 + Millis(500));
    close();
  }
  // Stops serving without telling anyone that the job ended: an attempt restarted in place
  // (launcher/restarts.h). Its port is free for the next attempt's coordinator once this
  // one is destroyed; the sidecars retry meanwhile, as after any refused connection.
  void close() {
    closed_ = true;
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  nlohmann::json snapshot() {
    std::promise<nlohmann::json> done;
    boost::asio::post(io_, [&] {
      nlohmann::json hosts = parse_object(service_->engine().hosts_json(Clock::now()));
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& [rank, event] : service_->engine().ranks()) {
        ranks.push_back(rank_json({rank, event.host, event.event != rdv::RankEventKind::kStart, event.code,
                                   event.signal, event.seconds, true, event.left_processes}));
      }
      const nlohmann::json* rows = node_at(hosts, "/hosts");
      done.set_value({{"hosts", rows != nullptr ? *rows : nlohmann::json::array()}, {"ranks", ranks}});
    });
    return done.get_future().get();
  }
  ~JobRendezvous() { finish(false); }

 private:
  std::string listen_address_;
  int port_;
  boost::asio::io_context io_;
  std::unique_ptr<rdv::CoordinatorService> service_;
  std::thread thread_;
  Millis beat_{5000};
  bool closed_ = false;
};

}  // namespace tmpi::launch

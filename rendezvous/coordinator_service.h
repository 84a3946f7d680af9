// The coordinator as a service: the protocol engine (coordinator.h) behind the HTTP server
// (http_server.h), on one io_context. It resolves the host name a registration claims with
// asio's asynchronous resolver, so DNS never blocks the loop, and ticks the engine's timers.
// mpi-launcher embeds it; `mpi-rendezvous serve` runs it alone.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/params.h"
#include "common/topology.h"
#include "rendezvous/coordinator.h"
#include "rendezvous/http_server.h"

namespace tmpi::rdv {

class CoordinatorService {
 public:
  CoordinatorService(boost::asio::io_context& io, CoordinatorConfig config, CoordinatorCallbacks callbacks,
                     const ServerLimits& limits = {});
  Expected<unsigned short> listen(const std::string& address, unsigned short port);
  void stop();
  Coordinator& engine() { return engine_; }
  const HttpServer& server() const { return server_; }

 private:
  void on_call(Call call, Respond respond);
  void schedule_tick();

  Coordinator engine_;
  HttpServer server_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
};

// The coordinator's clocks, from --rendezvous-timeout, --beat-interval and --lost-after.
struct RendezvousTimes {
  Millis deadline{0}, beat_interval{0}, lost_after{0};
};

// The config for a job: its hosts (those that run ranks, with their slots), the key derived
// from the job's private key, and its clocks. mpi-launcher has the topology in hand; `serve`
// loads it with the next one.
CoordinatorConfig coordinator_config(const Topology& topology, std::string_view private_key,
                                     const RendezvousTimes& times);
// The same from hosts.json and the key in ssh_dir.
Expected<CoordinatorConfig> coordinator_config(const std::string& hosts_file, const std::string& ssh_dir,
                                               const RendezvousTimes& times);

}  // namespace tmpi::rdv

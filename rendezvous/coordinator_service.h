// The coordinator as a service: the protocol engine (coordinator.h) behind the HTTP server
// (http_server.h), on one io_context. It resolves the host name a registration claims with
// asio's asynchronous resolver, so DNS never blocks the loop, and ticks the engine's timers.
// mpi-launcher embeds it; `mpi-rendezvous serve` runs it alone.
#pragma once

#include "rendezvous/coordinator.h"
#include "rendezvous/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>

namespace tmpi::rdv {

class CoordinatorService {
 public:
  CoordinatorService(boost::asio::io_context& io, CoordinatorConfig config, CoordinatorCallbacks callbacks,
                     ServerLimits limits = {});
  Expected<unsigned short> listen(const std::string& address, unsigned short port);
  void stop();
  Coordinator& engine() { return engine_; }
  const HttpServer& server() const { return server_; }

 private:
  void on_call(Call call, Respond respond);
  void schedule_tick();

  boost::asio::io_context& io_;
  Coordinator engine_;
  HttpServer server_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
};

// Loads hosts.json and the job key from ssh_dir into a config (hosts = the hosts that run
// ranks; the key derived from the private key).
Expected<CoordinatorConfig> coordinator_config(const std::string& hosts_file, const std::string& ssh_dir);

}  // namespace tmpi::rdv

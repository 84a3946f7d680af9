// See coordinator_service.h.
#include "rendezvous/coordinator_service.h"

#include "common/files.h"
#include "common/job_key.h"
#include "common/proof.h"
#include "common/topology.h"

namespace tmpi::rdv {

namespace asio = boost::asio;

CoordinatorService::CoordinatorService(asio::io_context& io, CoordinatorConfig config,
                                       CoordinatorCallbacks callbacks, const ServerLimits& limits)
    : engine_(std::move(config), std::move(callbacks), Clock::now()),
      server_(
          io, [this](Call call, Respond respond) { on_call(std::move(call), std::move(respond)); }, limits),
      resolver_(io),
      timer_(io) {}

Expected<unsigned short> CoordinatorService::listen(const std::string& address, unsigned short port) {
  TMPI_ASSIGN(unsigned short bound, server_.listen(address, port));
  schedule_tick();
  return bound;
}

void CoordinatorService::stop() {
  stopped_ = true;
  server_.stop();
  timer_.cancel();
  resolver_.cancel();
}

void CoordinatorService::on_call(Call call, Respond respond) {
  auto host = engine_.host_to_resolve(call);
  if (!host) return respond(engine_.handle(call, Clock::now()));
  engine_.lookup_started(*host);
  resolver_.async_resolve(
      *host, "",
      [this, host = *host, call = std::move(call), respond = std::move(respond)](
          const boost::system::error_code& ec, const asio::ip::tcp::resolver::results_type& results) mutable {
        engine_.lookup_ended(host);
        if (!ec) {
          for (const auto& entry : results) call.resolved.push_back(entry.endpoint().address().to_string());
        }
        respond(engine_.handle(call, Clock::now()));
      });
}

void CoordinatorService::schedule_tick() {
  if (stopped_) return;
  timer_.expires_after(Millis(250));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    engine_.server_counts(server_.counts(), Clock::now());
    engine_.tick(Clock::now());
    schedule_tick();
  });
}

CoordinatorConfig coordinator_config(const Topology& topology, std::string_view private_key,
                                     const RendezvousTimes& times) {
  CoordinatorConfig config;
  for (const auto& host : topology.hosts) {
    config.hosts.push_back(host.name);
    config.slots[host.name] = host.slots;
  }
  config.key = derive_rendezvous_key(private_key);
  config.epoch = random_nonce();  // this launch's: a body of an earlier one is refused
  config.deadline = times.deadline;
  config.beat_interval = times.beat_interval;
  config.lost_after = times.lost_after;
  return config;
}

Expected<CoordinatorConfig> coordinator_config(const std::string& hosts_file, const std::string& ssh_dir,
                                               const RendezvousTimes& times) {
  TMPI_ASSIGN(std::string text, read_file(hosts_file));
  TMPI_ASSIGN(Topology topology, parse_hosts_json(text, hosts_file));
  TMPI_ASSIGN(KeyFile key, find_job_key(ssh_dir));
  return coordinator_config(topology, key.text, times);
}

}  // namespace tmpi::rdv

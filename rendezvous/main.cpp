// mpi-rendezvous: the node sidecar (default), or `mpi-rendezvous serve`, the coordinator on
// its own (mpi-launcher embeds the same service), for debugging and for tests.
#include <netdb.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/cli.h"
#include "common/files.h"
#include "common/http_client.h"
#include "common/job_key.h"
#include "common/log.h"
#include "common/params.h"
#include "common/process.h"
#include "common/proof.h"
#include "common/topology.h"
#include "common/utf8.h"
#include "rendezvous/api_relay_start.h"
#include "rendezvous/coordinator_service.h"
#include "rendezvous/inplace_agent.h"
#include "rendezvous/protocol.h"
#include "rendezvous/sidecar.h"

namespace tmpi::rdv {

namespace {

constexpr const char* kSynopsis =
    "mpi-rendezvous [options]          the node sidecar\n"
    "       mpi-rendezvous serve [options]    the coordinator alone\n"
    "       mpi-rendezvous end [options]      tell the coordinator that the job has ended\n"
    "       mpi-rendezvous in-place-agent [options]  JobSet's in-place restart barrier (inplace_agent.h)\n"
    "       mpi-rendezvous relay [options]    the launcher's API relay alone (Events), for tests";

Status serve(const Params& params) {
  RendezvousTimes times{params.duration(param::kRendezvousTimeout), params.duration(param::kBeatInterval),
                        params.duration(param::kLostAfter)};
  TMPI_ASSIGN(CoordinatorConfig config,
              coordinator_config(params.str(param::kHosts), params.str(param::kSshDir), times));
  boost::asio::io_context io;
  std::optional<Error> failure;
  CoordinatorCallbacks callbacks;
  callbacks.progress = [](const std::string& line) { spdlog::info("rendezvous: {}", line); };
  callbacks.barrier_open = [] { spdlog::info("rendezvous: every host is ready; the barrier is open"); };
  callbacks.refused = [](const std::string& what) { spdlog::warn("rendezvous: {}", what); };
  callbacks.host_lost = [](const std::string& host, const std::string& why) {
    spdlog::error("rendezvous: host {} lost: {}", host, why);
  };
  callbacks.deadline = [&](const std::string& summary) {
    failure = make_error(Exit::kTempFail, "rendezvous timed out after {} s: {}; raise {}",
                         params.duration(param::kRendezvousTimeout).count() / 1000, summary,
                         env_name(param::kRendezvousTimeout.name));
    io.stop();
  };
  // After the end, serve two more beat intervals so that every sidecar hears of it.
  boost::asio::steady_timer linger(io);
  callbacks.job_ended = [&] {
    spdlog::info("rendezvous: the job has ended; telling the sidecars");
    linger.expires_after(config.beat_interval * 2 + Millis(1000));
    linger.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) io.stop();
    });
  };
  launch::fit_descriptor_limit();  // the listener's connection cap is taken from it
  CoordinatorService service(io, config, callbacks);
  TMPI_ASSIGN(unsigned short port,
              service.listen(params.str(param::kListenAddress),
                             static_cast<unsigned short>(params.integer(param::kRendezvousPort))));
  spdlog::info("coordinator on {}:{} for {} hosts", service.server().listening_on(), port,
               config.hosts.size());
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
  io.run();
  if (failure) return *failure;
  return ok_status();
}

// What `hostname -f` prints: the canonical name of this pod's hostname (from /etc/hosts,
// where Kubernetes writes "IP hostname.subdomain... hostname"), else hostname.subdomain.
std::string default_host(const std::string& subdomain) {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  std::string host = name;
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  addrinfo* found = nullptr;
  if (host.find('.') == std::string::npos && getaddrinfo(name, nullptr, &hints, &found) == 0) {
    if (found != nullptr && found->ai_canonname != nullptr) host = found->ai_canonname;
    freeaddrinfo(found);
  }
  if (host.find('.') == std::string::npos && !subdomain.empty()) host += "." + subdomain;
  return host;
}

// `mpi-rendezvous end`: tells the coordinator that the job has ended (for debugging; the
// launcher does it itself).
Status end_job(const Params& params) {
  TMPI_ASSIGN(KeyFile key_file, find_job_key(params.str(param::kSshDir)));
  const std::string& key = key_file.text;
  std::string coordinator = params.str(param::kCoordinator);
  if (coordinator.empty()) coordinator = fmt::format("127.0.0.1:{}", params.integer(param::kRendezvousPort));
  const std::string rendezvous_key = derive_rendezvous_key(key);
  HttpClient client{TlsConfig{}};
  auto post = [&](const char* path, const std::string& body) {
    return client.send(HttpRequest{"POST",
                                   fmt::format("http://{}{}", coordinator, path),
                                   body,
                                   {"Content-Type: application/json"},
                                   Millis(5000),
                                   "",
                                   std::size_t{1} << 20});
  };
  // The end is signed in the coordinator's epoch, which its signed challenge tells.
  Hello hello{random_nonce()};
  TMPI_ASSIGN(HttpResponse told, post(kHelloPath, signed_body(rendezvous_key, hello)));
  auto epoch = read_answer<EpochTold>(rendezvous_key, Kind::kHello, hello.nonce, told.status, told.body);
  if (!epoch || !std::holds_alternative<EpochTold>(*epoch)) {
    return make_error(Exit::kUnavailable, "{} gave no epoch that verifies: HTTP {} {}", coordinator,
                      told.status, truncate_utf8(told.body, 200, "..."));
  }
  EndJob end{random_nonce(), std::get<EpochTold>(*epoch).epoch};
  TMPI_ASSIGN(HttpResponse response, post(kEndPath, signed_body(rendezvous_key, end)));
  auto ended = read_answer<JobState>(rendezvous_key, Kind::kEnd, end.nonce, response.status, response.body);
  if (!ended || !std::holds_alternative<JobState>(*ended)) {
    return make_error(Exit::kUnavailable, "{} did not take the end: HTTP {} {}", coordinator, response.status,
                      truncate_utf8(response.body, 200, "..."));
  }
  spdlog::info("told {} that the job has ended", coordinator);
  return ok_status();
}

// A node pod has no hosts.json unless one is mounted: then --coordinator names the
// launcher, and the pod's name is its own `hostname -f`.
Status sidecar(const Params& params) {
  SidecarOptions options;
  options.coordinator = params.str(param::kCoordinator);
  Topology topology;
  if (file_exists(params.str(param::kHosts)) || options.coordinator.empty()) {
    TMPI_ASSIGN(std::string hosts_text, read_file(params.str(param::kHosts)));
    TMPI_ASSIGN(topology, parse_hosts_json(hosts_text, params.str(param::kHosts)));
  }
  options.host = params.is_set(param::kHost) ? params.str(param::kHost) : default_host(topology.subdomain);
  if (!topology.hosts.empty()) {
    const Host* self = nullptr;
    for (const auto& host : topology.hosts) {
      if (host.name == options.host) self = &host;
    }
    if (self == nullptr) {
      return make_error(Exit::kUsage, "host {} is not in {}; pass --host NAME as hosts.json names this pod",
                        options.host, params.str(param::kHosts));
    }
    options.slots = self->slots;
    options.gpus = self->gpus;
  }
  if (options.coordinator.empty()) {
    if (!topology.launcher)
      return make_error(Exit::kUsage, "{} names no launcher; pass --coordinator HOST:PORT",
                        params.str(param::kHosts));
    options.coordinator =
        fmt::format("{}:{}", topology.launcher->name, params.integer(param::kRendezvousPort));
  }
  options.ssh_port = static_cast<int>(params.integer(param::kSshPort));
  options.deadline = params.duration(param::kDeadline);
  TMPI_ASSIGN(KeyFile key, find_job_key(params.str(param::kSshDir)));
  options.private_key = std::move(key.text);
  // The launcher pod's sidecar alone holds a token: it relays the launcher's Events.
  TMPI_ASSIGN(std::unique_ptr<ApiRelay> relay, start_api_relay(params, options.private_key, true));
  Sidecar sidecar(options);
  // /readyz for the readiness probe, on its own thread: ready while sshd accepts the key.
  boost::asio::io_context io;
  HttpServer probe(io, [&](const Call& call, const Respond& respond) {
    if (call.target == "/readyz") {
      return respond(sidecar.ssh_ready()
                         ? Reply{200, "ready\n", "text/plain"}
                         : Reply{503, "sshd does not accept the job key yet\n", "text/plain"});
    }
    respond(call.target == "/healthz" ? Reply{200, "ok\n", "text/plain"}
                                      : Reply{404, "{}", "application/json"});
  });
  TMPI_ASSIGN(unsigned short probe_port,
              probe.listen(params.str(param::kListenAddress),
                           static_cast<unsigned short>(params.integer(param::kProbePort))));
  // SIGTERM (the pod is being deleted) or SIGINT: say so to the coordinator, on the probe's
  // thread, and let the loop end; the launcher names the host at once, not after lost-after.
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::atomic<bool> stopped{false};
  signals.async_wait([&sidecar, &stopped](const boost::system::error_code& ec, int) {
    if (ec) return;
    stopped = true;
    sidecar.leave();
  });
  // The probe's loop is stopped, and its thread joined, on every way out of this scope (an
  // exception's too: a thread still joinable at unwind is std::terminate). The guard is
  // declared after the thread, so it runs first.
  std::jthread probe_thread([&io] { io.run(); });
  struct StopOnExit {
    boost::asio::io_context& io;
    ~StopOnExit() { io.stop(); }
  } stop_probe{io};
  spdlog::info("sidecar for {}: coordinator {}, /readyz on port {}", options.host, options.coordinator,
               probe_port);
  Status ran = sidecar.run();
  if (stopped && relay) relay->say_last_word();  // the kubelet stops the sidecars once the launcher ended
  return ran;
}

// `mpi-rendezvous in-place-agent`: JobSet's barrier in its own native sidecar, with the only
// token of the pod (rendezvous/inplace_agent.h); /barrier-is-down for its startup probe.
Status in_place_agent(const Params& params) {
  inplace::AgentOptions options{params.str(param::kInPlaceJobset), params.str(param::kInPlacePod),
                                params.duration(param::kInPlacePoll)};
  if (options.jobset.empty() || options.pod.empty()) {
    return make_error(Exit::kUsage,
                      "in-place-agent needs --in-place-jobset and --in-place-pod (the downward "
                      "API's metadata.labels['jobset.sigs.k8s.io/jobset-name'] and metadata.name)");
  }
  TMPI_ASSIGN(KubeConfig config,
              load_kube_config(current_environment(), params.str(param::kInPlaceTokenDir), ""));
  // Its answers are one JobSet and one pod's apply: objects, never lists.
  KubeClient kube(std::move(config), params.duration(param::kApiRequestTimeout), kOneObjectMaxBody);
  inplace::Agent agent(options, kube);
  boost::asio::io_context io;
  HttpServer probe(io, [&agent](const Call& call, const Respond& respond) {
    if (call.target != "/barrier-is-down") return respond(Reply{404, "{}", "application/json"});
    respond(agent.barrier_down() ? Reply{200, "the barrier is down\n", "text/plain"}
                                 : Reply{503, "the barrier is up\n", "text/plain"});
  });
  TMPI_ASSIGN(unsigned short port,
              probe.listen(params.str(param::kListenAddress),
                           static_cast<unsigned short>(params.integer(param::kBarrierPort))));
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&agent](const boost::system::error_code& ec, int) {
    if (!ec) agent.stop();
  });
  std::jthread probe_thread([&io] { io.run(); });
  struct StopOnExit {
    boost::asio::io_context& io;
    ~StopOnExit() { io.stop(); }
  } stop_probe{io};
  spdlog::info("in-place agent: /barrier-is-down on port {}", port);
  return agent.run();
}

// `mpi-rendezvous relay`: the API relay without a host to register, until SIGTERM or SIGINT.
Status relay_alone(const Params& params) {
  TMPI_ASSIGN(KeyFile key, find_job_key(params.str(param::kSshDir)));
  TMPI_ASSIGN(std::unique_ptr<ApiRelay> relay, start_api_relay(params, key.text, false));
  if (!relay)
    return make_error(Exit::kUsage, "no token in {}: the relay has nothing to send Events with",
                      params.str(param::kServiceAccountDir));
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](const boost::system::error_code&, int) { io.stop(); });
  io.run();
  relay->say_last_word();  // the kubelet stops the sidecars once the launcher ended
  return ok_status();
}

Status run(const std::vector<std::string>& args) {
  TMPI_ASSIGN(Params params, Params::parse(kScopeRendezvous, args, current_environment()));
  if (params.help_requested()) {
    std::cout << help_text(kSynopsis, kScopeRendezvous);
    return ok_status();
  }
  TMPI_CHECK(log::setup_from("mpi-rendezvous", params));
  const auto& words = params.positional();
  if (words.empty()) return sidecar(params);
  if (words.size() == 1 && words[0] == "serve") return serve(params);
  if (words.size() == 1 && words[0] == "end") return end_job(params);
  if (words.size() == 1 && words[0] == "in-place-agent") return in_place_agent(params);
  if (words.size() == 1 && words[0] == "relay") return relay_alone(params);
  return make_error(Exit::kUsage, "unknown command '{}'; see --help", words[0]);
}

}  // namespace

}  // namespace tmpi::rdv

int main(int argc, char** argv) {
  return tmpi::cli::run("mpi-rendezvous", argc, argv, tmpi::rdv::run);
}

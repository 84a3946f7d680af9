// A small asynchronous HTTP/1.1 server on Boost.Beast: one io_context, one thread, many
// keep-alive connections (a sidecar holds one for its beats). It enforces the limits a
// server facing every pod of a job needs: a connection cap, header and body size limits,
// a header deadline and an idle timeout. A malformed request gets 400 and the connection
// is closed; nothing a client sends can stall the loop.
//
// Admission is by proof, not by address count: a connection is "unproven" until the handler
// answers one of its requests with Reply::proven (the request carried the job key's proof).
// Unproven connections get a short idle deadline and a per-address cap; at the global cap a
// new connection evicts the least recently active idle unproven one instead of being
// refused. So a flood from anyone without the key can hold at most the slots that no key
// holder needs, and only until a key holder connects: a proven connection is never evicted.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/backoff.h"
#include "common/error.h"
#include "rendezvous/coordinator.h"

namespace tmpi::rdv {

struct ServerLimits {
  std::size_t max_connections = 20000;     // lowered to what RLIMIT_NOFILE allows, less a reserve
  std::size_t per_peer_connections = 256;  // unproven ones of one address: it cannot take every slot
  Millis accept_pause{100};                // after a failed accept (no descriptor left)
  // Told once per run of failed accepts; default: a warning in the log. (A test takes it:
  // a sanitizer's check of a logger call needs a descriptor, which is what ran out.)
  std::function<void(const std::string&)> on_accept_paused;
  std::size_t header_bytes = 8 * 1024;
  std::size_t body_bytes = 64 * 1024;
  Millis header_timeout{10000};  // a request must arrive whole within this
  Millis idle_timeout{120000};   // a keep-alive connection with no request is closed
  // An unproven connection's deadline for its next request, first or not: what a stranger's
  // idle socket costs. A sidecar's or agent's first request is signed and comes at once.
  Millis unproven_timeout{5000};
};

// The handler answers through `respond`, now or later (after a DNS lookup, say).
using Respond = std::function<void(Reply)>;
using Handler = std::function<void(Call call, Respond respond)>;

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, Handler handler, const ServerLimits& limits = {});
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  // Binds address:port (port 0: any) and starts accepting; returns the bound port. "::"
  // (the default of --listen-address) takes both families (IPV6_V6ONLY off), and falls back
  // to 0.0.0.0 where the pod has no IPv6 (the IPv6 socket or its bind fails with
  // EAFNOSUPPORT or EADDRNOTAVAIL), so one default serves IPv4, IPv6 and dual-stack pods.
  Expected<unsigned short> listen(const std::string& address, unsigned short port);
  // The address bound ("::", "0.0.0.0" after the fallback, "10.0.0.5"); "" before listen.
  std::string listening_on() const;
  std::size_t max_connections() const;  // the cap in force
  ServerCounts counts() const;
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tmpi::rdv

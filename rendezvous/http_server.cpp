// See http_server.h. Each connection is a Session that reads one request (with a
// deadline), hands it to the handler, writes the reply, and reads the next. Sessions hold
// the shared State, so stopping the server while replies are in flight is safe.
#include "rendezvous/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <list>
#include <map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace tmpi::rdv {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Session;

struct HttpServer::State {
  State(asio::io_context& context, Handler h, ServerLimits l)
      : io(context), acceptor(context), retry(context), handler(std::move(h)), limits(std::move(l)) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // the pause after a failed accept (descriptors ran out)
  Handler handler;
  ServerLimits limits;
  std::size_t connections = 0;                  // open sockets, proven or not
  std::map<std::string, std::size_t> unproven;  // open unproven connections of each client address
  // Idle unproven connections (waiting for a request), least recently active first: the
  // ones to evict when a new connection finds the cap reached.
  std::list<Session*> idle_unproven;
  ServerCounts counts;
  bool stopped = false;
  bool warned = false;
};

namespace {

std::string peer_address(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "";
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).to_string();
  }
  return address.to_string();
}

}  // namespace

// A connection's life: read a request (with a deadline), hand it over, write the reply, and
// read the next. Its slot (the counts above) is given back when its socket closes, which an
// eviction does at once, not when the last handler holding it lets go.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::State> state, std::string peer)
      : stream_(std::move(socket)), state_(std::move(state)), peer_(std::move(peer)) {
    ++state_->connections;
    ++state_->unproven[peer_];
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { release(); }

  void read(Millis timeout) {
    if (!open_) return;
    if (!proven_) {
      timeout = std::min(timeout, state_->limits.unproven_timeout);
      idle_at_ = state_->idle_unproven.insert(state_->idle_unproven.end(), this);
      idle_ = true;
    }
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->limits.header_bytes));
    parser_->body_limit(state_->limits.body_bytes);
    stream_.expires_after(timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  // Closes the socket now (its descriptor is free at once); the pending read ends aborted.
  void close() {
    if (!open_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    release();
  }

 private:
  void leave_idle_line() {
    if (!idle_) return;
    state_->idle_unproven.erase(idle_at_);
    idle_ = false;
  }

  void release() {
    leave_idle_line();
    if (!open_) return;
    open_ = false;
    --state_->connections;
    if (!proven_) forget_unproven();
  }

  void forget_unproven() {
    if (auto it = state_->unproven.find(peer_); it != state_->unproven.end() && --it->second == 0)
      state_->unproven.erase(it);
  }

  void on_read(beast::error_code ec) {
    leave_idle_line();
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || state_->stopped || !open_) {
      return close();
    }
    if (ec) return write(Reply{400, fmt::format(R"({{"error":"bad request: {}"}})", ec.message())}, false);
    auto& request = parser_->get();
    Call call{std::string(request.method_string()),
              std::string(request.target()),
              std::move(request.body()),
              peer_,
              {}};
    bool keep_alive = request.keep_alive();
    stream_.expires_never();  // the handler may take a while (DNS); the reply is not timed
    // One bad request must not end the loop that serves every other pod.
    try {
      state_->handler(std::move(call), [self = shared_from_this(), keep_alive](Reply reply) {
        self->write(std::move(reply), keep_alive);
      });
    } catch (const std::exception& e) {
      write(Reply{500, fmt::format(R"({{"error":"internal error"}})")}, false);
    }
  }

  void write(Reply reply, bool keep_alive) {
    if (!open_) return;  // evicted or stopped while the handler ran
    if (reply.proven && !proven_) {
      proven_ = true;  // a key holder's: out of the strangers' share, never evicted
      forget_unproven();
    }
    auto response =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
    response->set(http::field::server, "trainer-mpi");
    response->set(http::field::content_type, reply.content_type);
    response->keep_alive(keep_alive);
    response->body() = std::move(reply.body);
    response->prepare_payload();
    stream_.expires_after(state_->limits.header_timeout);
    http::async_write(stream_, *response,
                      [self = shared_from_this(), response, keep_alive](beast::error_code ec, std::size_t) {
                        if (ec || !keep_alive) return self->close();
                        self->read(self->state_->limits.idle_timeout);
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpServer::State> state_;
  std::string peer_;
  bool open_ = true, proven_ = false, idle_ = false;
  std::list<Session*>::iterator idle_at_;
};

namespace {

// The connection cap: what was asked, within the process's descriptor limit less a reserve
// for everything else the process opens (files, the DNS resolver, libssh, curl).
std::size_t connection_cap(std::size_t asked) {
  constexpr rlim_t kReserve = 64;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return asked;
  rlim_t usable = limit.rlim_cur > kReserve * 2 ? limit.rlim_cur - kReserve : limit.rlim_cur / 2;
  return std::min<std::size_t>(asked, static_cast<std::size_t>(usable));
}

void drop(tcp::socket& socket, long long& counter) {
  beast::error_code ignored;
  socket.close(ignored);  // the client retries with backoff; the others are served
  ++counter;
}

// A new connection: within its address's share of unproven connections, and within the
// cap, making room by closing the least recently active idle unproven connection.
void admit(const std::shared_ptr<HttpServer::State>& state, tcp::socket socket) {
  std::string peer = peer_address(socket);
  // A peer with no address (gone before it was read) is served nothing: the engine reads an
  // empty peer as the launcher's own process.
  if (peer.empty()) {
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  auto it = state->unproven.find(peer);
  if (it != state->unproven.end() && it->second >= state->limits.per_peer_connections)
    return drop(socket, state->counts.refused_per_peer);
  if (state->connections >= state->limits.max_connections) {
    if (state->idle_unproven.empty()) return drop(socket, state->counts.refused);
    state->idle_unproven.front()->close();  // leaves the line, frees its descriptor
    ++state->counts.evicted;
  }
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  auto session = std::make_shared<Session>(std::move(socket), state, std::move(peer));
  session->read(state->limits.header_timeout);
}

void accept(const std::shared_ptr<HttpServer::State>& state) {
  state->acceptor.async_accept([state](beast::error_code ec, tcp::socket socket) {
    if (state->stopped) return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or memory: accepting again at once fails again
      // at once, a busy loop at 100% CPU. Pause, and let the open connections finish.
      if (!state->warned) {
        ++state->counts.accept_failures;
        std::string warning =
            fmt::format("rendezvous: cannot accept connections ({}); pausing {} ms between tries",
                        ec.message(), state->limits.accept_pause.count());
        if (state->limits.on_accept_paused) {
          state->limits.on_accept_paused(warning);
        } else {
          spdlog::warn("{}", warning);
        }
        state->warned = true;
      }
      state->retry.expires_after(state->limits.accept_pause);
      state->retry.async_wait([state](beast::error_code) {
        if (!state->stopped) accept(state);
      });
      return;
    }
    state->warned = false;
    admit(state, std::move(socket));
    accept(state);
  });
}

}  // namespace

HttpServer::HttpServer(asio::io_context& io, Handler handler, const ServerLimits& limits)
    : state_(std::make_shared<State>(io, std::move(handler), limits)) {
  state_->limits.max_connections = connection_cap(limits.max_connections);
}

HttpServer::~HttpServer() {
  try {
    stop();
  } catch (const std::exception& e) {  // a timer's cancel may throw; a destructor must not
    spdlog::debug("http server: stopping: {}", e.what());
  }
}

namespace {

// Opens, binds and listens on `endpoint`; the first step's error, with the acceptor closed.
boost::system::error_code open_and_listen(tcp::acceptor& acceptor, const tcp::endpoint& endpoint) {
  boost::system::error_code ec;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  // "::" takes IPv4 too, whatever the node's net.ipv6.bindv6only says: IPv4 peers arrive
  // v4-mapped, and peer_address unmaps them.
  if (!ec && endpoint.address().is_v6() && endpoint.address().is_unspecified())
    acceptor.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
  }
  return ec;
}

// What a pod without IPv6 answers to an IPv6 socket: a kernel booted with ipv6.disable=1 has
// no AF_INET6 (EAFNOSUPPORT); one that has it but no IPv6 address may refuse the bind
// (EADDRNOTAVAIL). Any other error (EADDRINUSE, EACCES) is the user's to hear.
bool no_ipv6_here(const boost::system::error_code& ec) {
  return ec == boost::system::errc::address_family_not_supported ||
         ec == boost::system::errc::address_not_available;
}

}  // namespace

Expected<unsigned short> HttpServer::listen(const std::string& address, unsigned short port) {
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  if (ec) return make_error(Exit::kUsage, "listen address '{}': {}", address, ec.message());
  ec = open_and_listen(state_->acceptor, tcp::endpoint(ip, port));
  if (ec && no_ipv6_here(ec) && ip.is_v6() && ip.is_unspecified()) {
    spdlog::debug("http server: no IPv6 here ({}); listening on 0.0.0.0:{} instead of [::]", ec.message(),
                  port);
    ec = open_and_listen(state_->acceptor, tcp::endpoint(asio::ip::address_v4::any(), port));
  }
  if (ec) {
    return make_error(Exit::kUnavailable, "cannot listen on {}:{}: {}; is another process using the port?",
                      ip.is_v6() ? fmt::format("[{}]", address) : address, port, ec.message());
  }
  accept(state_);
  return state_->acceptor.local_endpoint().port();
}

std::string HttpServer::listening_on() const {
  boost::system::error_code ec;
  auto endpoint = state_->acceptor.local_endpoint(ec);
  return ec ? "" : endpoint.address().to_string();
}

void HttpServer::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
  state_->retry.cancel();
}

std::size_t HttpServer::max_connections() const {
  return state_->limits.max_connections;
}

ServerCounts HttpServer::counts() const {
  return state_->counts;
}

}  // namespace tmpi::rdv

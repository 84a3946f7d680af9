// See http_server.h. Each connection is a Session that reads one request (with a
// deadline), hands it to the handler, writes the reply, and reads the next. Sessions hold
// the shared State, so stopping the server while replies are in flight is safe.
#include "rendezvous/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tmpi::rdv {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::State {
  State(asio::io_context& context, Handler h, ServerLimits l) : io(context), acceptor(context), handler(std::move(h)), limits(l) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  Handler handler;
  ServerLimits limits;
  std::size_t connections = 0;
  bool stopped = false;
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

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::State> state)
      : stream_(std::move(socket)), state_(std::move(state)) {
    ++state_->connections;
    peer_ = peer_address(stream_.socket());
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { --state_->connections; }

  void read(Millis timeout) {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->limits.header_bytes));
    parser_->body_limit(state_->limits.body_bytes);
    stream_.expires_after(timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        state_->stopped) {
      return close();
    }
    if (ec) return write(Reply{400, fmt::format("{{\"error\":\"bad request: {}\"}}", ec.message())}, false);
    auto& request = parser_->get();
    Call call{std::string(request.method_string()), std::string(request.target()), std::move(request.body()), peer_, {}};
    bool keep_alive = request.keep_alive();
    stream_.expires_never();  // the handler may take a while (DNS); the reply is not timed
    // One bad request must not end the loop that serves every other pod.
    try {
      state_->handler(std::move(call), [self = shared_from_this(), keep_alive](Reply reply) {
        self->write(std::move(reply), keep_alive);
      });
    } catch (const std::exception& e) {
      write(Reply{500, fmt::format("{{\"error\":\"internal error\"}}")}, false);
    }
  }

  void write(Reply reply, bool keep_alive) {
    auto response = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
    response->set(http::field::server, "trainer-mpi");
    response->set(http::field::content_type, reply.content_type);
    response->keep_alive(keep_alive);
    response->body() = std::move(reply.body);
    response->prepare_payload();
    stream_.expires_after(state_->limits.header_timeout);
    http::async_write(stream_, *response, [self = shared_from_this(), response, keep_alive](beast::error_code ec, std::size_t) {
      if (ec || !keep_alive) return self->close();
      self->read(self->state_->limits.idle_timeout);
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpServer::State> state_;
  std::string peer_;
};

void accept(const std::shared_ptr<HttpServer::State>& state) {
  state->acceptor.async_accept([state](beast::error_code ec, tcp::socket socket) {
    if (state->stopped) return;
    if (!ec) {
      if (state->connections >= state->limits.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);  // over the cap: the client retries with backoff
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        auto session = std::make_shared<Session>(std::move(socket), state);
        session->read(state->limits.header_timeout);
      }
    }
    accept(state);
  });
}

}  // namespace

HttpServer::HttpServer(asio::io_context& io, Handler handler, ServerLimits limits)
    : state_(std::make_shared<State>(io, std::move(handler), limits)) {}

HttpServer::~HttpServer() { stop(); }

Expected<unsigned short> HttpServer::listen(const std::string& address, unsigned short port) {
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  if (ec) return make_error(Exit::kUsage, "listen address '{}': {}", address, ec.message());
  tcp::endpoint endpoint(ip, port);
  state_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state_->acceptor.bind(endpoint, ec);
  if (!ec) state_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(Exit::kUsage, "cannot listen on {}:{}: {}; is another process using the port?", address, port,
                      ec.message());
  }
  accept(state_);
  return state_->acceptor.local_endpoint().port();
}

void HttpServer::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
}


}  // namespace tmpi::rdv

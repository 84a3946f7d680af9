// See plain_http.h. The whole exchange runs as asynchronous operations on a private
// io_context with run_for(timeout), which gives one deadline without threads of its own; a
// name (not an IP literal) is looked up on asio's resolver thread, which that deadline does
// not cut short.
#include "common/plain_http.h"

#include <charconv>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tmpi {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Expected<HttpResponse> plain_http(const std::string& method, const std::string& address,
                                  const std::string& target, const std::string& body, Millis timeout) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return make_error(Exit::kUsage, "'{}' is not HOST:PORT", address);
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  asio::io_context io;
  beast::tcp_stream stream(io);
  http::request<http::string_body> request(http::string_to_verb(method), target, 11);
  request.set(http::field::host, host);
  request.set(http::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  beast::error_code failure;
  bool done = false;
  auto exchange = [&](beast::error_code cec) {
    if (cec) return void(failure = cec);
    http::async_write(stream, request, [&](beast::error_code wec, std::size_t) {
      if (wec) return void(failure = wec);
      http::async_read(stream, buffer, response, [&](beast::error_code rec, std::size_t) {
        failure = rec;
        done = !rec;
      });
    });
  };
  // An IP literal ("10.0.0.5", "[fd00::5]") is connected to as it is: no lookup, so no
  // resolver thread (asio joins it when the request ends, however long a stalled DNS holds
  // it, past the deadline) and no DNS at all. The launcher gives the agents its address so.
  std::string literal =
      host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  beast::error_code not_literal;
  asio::ip::address ip = asio::ip::make_address(literal, not_literal);
  std::optional<asio::ip::tcp::resolver> resolver;
  if (!not_literal) {
    unsigned port_number = 0;
    auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), port_number);
    if (error != std::errc() || end != port.data() + port.size() || port_number == 0 || port_number > 65535)
      return make_error(Exit::kUsage, "'{}' is not HOST:PORT (the port is 1 to 65535)", address);
    stream.async_connect(asio::ip::tcp::endpoint(ip, static_cast<unsigned short>(port_number)), exchange);
  } else {
    resolver.emplace(io);
    resolver->async_resolve(
        host, port, [&](beast::error_code ec, const asio::ip::tcp::resolver::results_type& found) {
          if (ec) return void(failure = ec);
          stream.async_connect(found,
                               [&](beast::error_code cec, const asio::ip::tcp::endpoint&) { exchange(cec); });
        });
  }
  io.run_for(timeout);
  if (!done) {
    return make_error(failure ? Exit::kUnavailable : Exit::kTempFail, "{} http://{}{}: {}", method, address,
                      target,
                      failure ? failure.message() : fmt::format("no answer in {} ms", timeout.count()));
  }
  HttpResponse out;
  out.status = static_cast<long>(response.result_int());
  out.body = std::move(response.body());
  return out;
}

}  // namespace tmpi

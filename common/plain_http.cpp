// See plain_http.h. The whole exchange runs as asynchronous operations on a private
// io_context with run_for(timeout), which gives one deadline without threads.
#include "common/plain_http.h"

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
  asio::ip::tcp::resolver resolver(io);
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
  resolver.async_resolve(
      host, port, [&](beast::error_code ec, const asio::ip::tcp::resolver::results_type& found) {
        if (ec) return void(failure = ec);
        stream.async_connect(found, [&](beast::error_code cec, const asio::ip::tcp::endpoint&) {
          if (cec) return void(failure = cec);
          http::async_write(stream, request, [&](beast::error_code wec, std::size_t) {
            if (wec) return void(failure = wec);
            http::async_read(stream, buffer, response, [&](beast::error_code rec, std::size_t) {
              failure = rec;
              done = !rec;
            });
          });
        });
      });
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

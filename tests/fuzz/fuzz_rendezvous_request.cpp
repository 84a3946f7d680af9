// libFuzzer target: a request as the coordinator receives it off the wire. Beast's parser
// (with the server's limits) reads the bytes; a complete request goes to the engine, which
// must answer every method, target and body with a status, never a crash or a hang.
#include <cstdint>
#include <cstdlib>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "common/proof.h"
#include "rendezvous/coordinator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace http = boost::beast::http;
  static const auto start = tmpi::Clock::now();
  tmpi::rdv::CoordinatorConfig config;
  config.hosts = {"j-node-0-0.j", "j-node-0-1.j"};
  config.key = tmpi::derive_rendezvous_key("fuzz");
  tmpi::rdv::Coordinator coordinator(config, {}, start);

  http::request_parser<http::string_body> parser;
  parser.header_limit(8 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_done()) return 0;
  auto& request = parser.get();
  tmpi::rdv::Call call{std::string(request.method_string()),
                       std::string(request.target()),
                       request.body(),
                       "10.0.0.1",
                       {"10.0.0.1"}};
  (void)coordinator.host_to_resolve(call);  // the lookup decision reads the body first (register, rank)
  auto reply = coordinator.handle(call, start + std::chrono::seconds(1));
  if (reply.status < 200 || reply.status > 599) std::abort();
  coordinator.tick(start + std::chrono::seconds(400));
  return 0;
}

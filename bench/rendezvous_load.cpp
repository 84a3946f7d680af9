// rendezvous_load: the load generator of the rendezvous benchmark. It plays COUNT node
// sidecars, each a real TCP connection from its own loopback address (127.a.b.c, which is
// also its host name, so the coordinator's "name resolves to the peer" check runs), and
// registers each with a valid proof, at most INFLIGHT at a time; connections stay open, as
// sidecars keep theirs. It prints the time from the first registration sent to the reply
// that reports the barrier open.
//
// usage: rendezvous_load PORT COUNT KEYFILE [INFLIGHT]
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>  // std::exchange, which boost/asio/awaitable.hpp (1.74) uses without including

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "common/files.h"
#include "common/proof.h"
#include "rendezvous/protocol.h"

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string host_of(int i) {
  return fmt::format("127.{}.{}.{}", 1 + i / 62500, (i / 250) % 250, 2 + i % 250);
}

struct Load {
  asio::io_context io;
  unsigned short port = 0;
  int count = 0, inflight = 0, next = 0, accepted = 0, failed = 0;
  std::string key;
  std::optional<Clock::time_point> first, opened;
  std::vector<std::shared_ptr<tcp::socket>> open;

  void launch() {
    if (next >= count) return;
    int i = next++;
    auto socket = std::make_shared<tcp::socket>(io);
    socket->open(tcp::v4());
    socket->bind(tcp::endpoint(asio::ip::make_address(host_of(i)), 0));
    socket->async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                          [this, socket, i](boost::system::error_code ec) { on_connect(socket, i, ec); });
  }

  void on_connect(const std::shared_ptr<tcp::socket>& socket, int i, boost::system::error_code ec) {
    if (ec) return done(false);
    std::string host = host_of(i), nonce = tmpi::random_nonce();
    auto request =
        std::make_shared<http::request<http::string_body>>(http::verb::post, tmpi::rdv::kRegisterPath, 11);
    request->set(http::field::host, "coordinator");
    request->set(http::field::content_type, "application/json");
    request->body() =
        tmpi::rdv::signed_body(key, tmpi::rdv::Registration{host, 1, 0, true, "", "bench", nonce});
    request->prepare_payload();
    if (!first) first = Clock::now();
    http::async_write(*socket, *request, [this, socket, request](boost::system::error_code wec, std::size_t) {
      if (wec) return done(false);
      auto buffer = std::make_shared<boost::beast::flat_buffer>();
      auto response = std::make_shared<http::response<http::string_body>>();
      http::async_read(*socket, *buffer, *response,
                       [this, socket, buffer, response](boost::system::error_code rec, std::size_t) {
                         if (rec || response->result_int() != 200) return done(false);
                         if (!opened && response->body().find(R"("barrier":"open")") != std::string::npos)
                           opened = Clock::now();
                         open.push_back(socket);
                         done(true);
                       });
    });
  }

  void done(bool ok) {
    ok ? ++accepted : ++failed;
    launch();
  }
};

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: rendezvous_load PORT COUNT KEYFILE [INFLIGHT]\n";
    return 2;
  }
  Load load;
  load.port = static_cast<unsigned short>(std::stoi(argv[1]));
  load.count = std::stoi(argv[2]);
  load.inflight = argc > 4 ? std::stoi(argv[4]) : 256;
  auto key = tmpi::read_file(argv[3]);
  if (!key) {
    std::cerr << key.error().message << "\n";
    return 2;
  }
  load.key = tmpi::derive_rendezvous_key(*key);
  for (int i = 0; i < load.inflight; ++i) load.launch();
  load.io.run();
  double seconds =
      load.first && load.opened ? std::chrono::duration<double>(*load.opened - *load.first).count() : -1;
  std::cout << fmt::format("{{\"count\":{},\"accepted\":{},\"failed\":{},\"seconds\":{:.3f}}}\n", load.count,
                           load.accepted, load.failed, seconds);
  return load.failed == 0 && seconds >= 0 ? 0 : 1;
}

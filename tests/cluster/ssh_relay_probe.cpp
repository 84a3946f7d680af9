// ssh_relay_probe KEY PORT HOST...: the launcher's ssh relay on its own, for the cluster
// tests (ssh_relay_test.sh). It runs the ssh check over HOSTs with the job key as
// mpi-launcher does beside a launch, hands each verdict to a relay, prints the relay's socket
// path, and serves until its stdin closes; then it prints what the relay counted. The test
// then runs mpi-ssh against it with command shapes that a job seldom shows on its own.
#include <fstream>
#include <iostream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "launcher/preflight.h"
#include "ssh/relay.h"

int main(int argc, char** argv) {
  using namespace tmpi::launch;
  if (argc < 4) {
    std::cerr << "usage: ssh_relay_probe KEY PORT HOST...\n";
    return 64;
  }
  spdlog::set_level(spdlog::level::warn);  // stdout is the test's: the socket path, then the counts
  std::ifstream key_file(argv[1]);
  std::stringstream key;
  key << key_file.rdbuf();
  int port = std::stoi(argv[2]);
  std::vector<std::string> hosts(argv + 3, argv + argc);
  auto relay = SshRelay::start(hosts, port);
  if (!relay) {
    std::cerr << relay.error().message << "\n";
    return 70;
  }
  std::cout << (*relay)->socket_path() << std::endl;
  auto rows =
      check_ssh(hosts, port, key.str(), 16, tmpi::Millis(10000),
                [&](const std::string& host, tmpi::SshSessionPtr session, const std::string& problem) {
                  if (session) return (*relay)->offer(host, std::move(session));
                  (*relay)->refuse(host, problem);
                });
  for (const auto& row : rows) std::cerr << "check: " << row.host << ": " << row.reason << "\n";
  for (std::string line; std::getline(std::cin, line);) {
  }
  SshRelay::Counts counts = (*relay)->counts();
  relay->reset();
  std::cout << "relayed " << counts.relayed << ", fell back " << counts.fell_back << ", failed "
            << counts.failed << std::endl;
  return rows.empty() ? 0 : 1;
}

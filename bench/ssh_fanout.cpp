// ssh_fanout: times the launcher's preflight ssh check (libssh, in parallel, bounded
// concurrency) over the given hosts, for bench/rows/launcher.sh.
// usage: ssh_fanout KEYFILE PORT HOST...
#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "common/files.h"
#include "launcher/preflight.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: ssh_fanout KEYFILE PORT HOST...\n";
    return 2;
  }
  auto key = tmpi::read_file(argv[1]);
  if (!key) {
    std::cerr << key.error().message << "\n";
    return 2;
  }
  std::vector<std::string> hosts(argv + 3, argv + argc);
  auto start = std::chrono::steady_clock::now();
  auto rows = tmpi::launch::check_ssh(hosts, std::stoi(argv[2]), *key);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& row : rows) std::cerr << row.host << ": " << row.reason << "\n";
  std::cout << fmt::format("{:.3f}\n", seconds);
  return rows.empty() ? 0 : 1;
}

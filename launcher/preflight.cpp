// See preflight.h.
#include "launcher/preflight.h"

#include <netdb.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <regex>
#include <sstream>
#include <system_error>
#include <thread>

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/ssh_probe.h"
#include "common/utf8.h"

namespace tmpi::launch {

namespace {

std::string short_name(const std::string& name) {
  return name.substr(0, name.find('.'));
}

}  // namespace

HostAddresses resolve_hosts(const std::vector<std::string>& names, std::vector<CheckRow>& failed,
                            const GiveUp& give_up) {
  HostAddresses found;
  for (const auto& name : names) {
    if (give_up && give_up()) break;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    int rc = getaddrinfo(name.c_str(), nullptr, &hints, &list);
    if (rc != 0) {
      failed.push_back({name, "dns", fmt::format("does not resolve ({})", gai_strerror(rc))});
      continue;
    }
    std::vector<std::string>& addresses = found[name];
    for (const addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
      char text[NI_MAXHOST] = {0};
      if (getnameinfo(entry->ai_addr, entry->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) == 0)
        addresses.emplace_back(text);
    }
    freeaddrinfo(list);
    std::sort(addresses.begin(), addresses.end());
    addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  }
  return found;
}

std::string coordinator_address(const std::string& name, const std::vector<std::string>& addresses,
                                const std::string& listen, int port) {
  auto with_port = [port](const boost::asio::ip::address& ip) {
    return ip.is_v6() ? fmt::format("[{}]:{}", ip.to_string(), port)
                      : fmt::format("{}:{}", ip.to_string(), port);
  };
  boost::system::error_code bad;
  auto listening = boost::asio::ip::make_address(listen, bad);
  if (!bad && !listening.is_unspecified()) return with_port(listening);
  bool any_family = !bad && listening.is_v6();  // "::" takes IPv4 too, unless the host says v6only
  for (const auto& text : addresses) {
    auto ip = boost::asio::ip::make_address(text, bad);
    if (bad || ip.is_loopback() || (ip.is_v6() && !any_family)) continue;
    if (ip.is_v6() && ip.to_v6().is_link_local()) continue;  // needs a scope that differs by pod
    return with_port(ip);
  }
  return fmt::format("{}:{}", name, port);
}

std::optional<GoneHost> recreated_host(const HostAddresses& at_launch, const HostAddresses& now) {
  for (const auto& entry : at_launch) {
    const std::string& name = entry.first;
    const std::vector<std::string>& before = entry.second;  // a lambda cannot take a binding (clang 14)
    auto it = now.find(name);
    if (before.empty() || it == now.end() || it->second.empty()) continue;
    const std::vector<std::string>& after = it->second;
    bool kept = std::any_of(after.begin(), after.end(), [&](const std::string& address) {
      return std::binary_search(before.begin(), before.end(), address);
    });
    if (!kept) {
      return GoneHost{name,
                      fmt::format("host {} lost (recreated at {} (was {}) after the job started, as its "
                                  "name resolves now: its ranks went with the old pod)",
                                  name, fmt::join(after, ", "), fmt::join(before, ", "))};
    }
  }
  return std::nullopt;
}

std::optional<GoneHost> find_lost_host(const std::vector<std::string>& hosts, const HostAddresses& at_launch,
                                       int port, const std::string& private_key, Millis budget,
                                       const GiveUp& stop) {
  Deadline deadline(budget);
  GiveUp give_up = [&] { return deadline.expired() || (stop && stop()); };
  std::vector<CheckRow> rows;
  HostAddresses now = resolve_hosts(hosts, rows, give_up);
  if (rows.empty()) {
    // A recreated pod answers ssh with the job's host key (every pod has it), so the handshake
    // alone would call it well: its new address is what tells (cluster.faults.recreated-after).
    if (auto moved = recreated_host(at_launch, now)) return moved;
    rows = check_ssh(hosts, port, private_key, 16, Millis(2000), {}, give_up);
  }
  if (rows.empty()) return std::nullopt;
  return GoneHost{rows.front().host,
                  fmt::format("host {} is gone ({})", rows.front().host, rows.front().reason)};
}

std::vector<CheckRow> check_ssh(const std::vector<std::string>& hosts, int port,
                                const std::string& private_key, int concurrency, Millis timeout,
                                const SshOutcome& outcome, const GiveUp& give_up, bool run_command) {
  std::vector<CheckRow> rows(hosts.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; !(give_up && give_up()) && (i = next++) < hosts.size();) {
      SshSessionPtr session;
      try {
        SshVerdict verdict = probe_ssh(SshTarget{hosts[i], port, "", timeout, run_command}, private_key,
                                       outcome ? &session : nullptr);
        if (!verdict.ok) rows[i] = {hosts[i], "ssh", verdict.problem};
      } catch (const std::exception& e) {  // on a worker, a throw would be std::terminate
        rows[i] = {hosts[i], "ssh", fmt::format("the check failed: {}", e.what())};
      }
      try {
        if (outcome) outcome(hosts[i], std::move(session), rows[i].reason);
      } catch (const std::exception& e) {  // the verdict stands in rows; only its session is lost
        spdlog::debug("ssh check: {}: its session was not kept ({})", hosts[i], e.what());
      }
    }
  };
  {
    // jthreads join on every way out, a failed start of the next one too: a thread still
    // joinable at unwind is std::terminate. Threads that cannot start (the process limit)
    // leave their share to the others, or to this thread.
    std::vector<std::jthread> workers;
    int count = std::max(1, std::min<int>(concurrency, static_cast<int>(hosts.size())));
    workers.reserve(count);
    try {
      for (int w = 0; w < count; ++w) workers.emplace_back(work);
    } catch (const std::system_error& e) {
      spdlog::debug("ssh check: {} of {} workers started ({})", workers.size(), count, e.what());
    }
    if (workers.empty()) work();
  }
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const CheckRow& row) { return row.host.empty(); }),
             rows.end());
  return rows;
}

std::vector<std::string> expected_placement(const Topology& topology, int np) {
  std::vector<std::string> out;
  while (static_cast<int>(out.size()) < np && topology.total_slots() > 0) {
    for (const auto& host : topology.hosts) {
      for (int s = 0; s < host.slots && static_cast<int>(out.size()) < np; ++s) out.push_back(host.name);
    }
  }
  return out;
}

namespace {

// rank -> the host it printed, from the probe's tagged output (Open MPI's --tag-output,
// hydra's -prepend-rank). Lines are short (a tag and a host name); a rank number that does
// not fit an int is not a rank.
std::map<int, std::string> probe_hosts(const std::string& output) {
  static const std::regex ompi(R"(^\[\d+,(\d{1,9})\]<stdout>:\s*(\S+))"), hydra(R"(^\[(\d{1,9})\]\s+(\S+))");
  std::map<int, std::string> ran;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, ompi) || std::regex_search(line, match, hydra)) {
      ran[std::stoi(match[1].str())] = match[2].str();
    }
  }
  return ran;
}

}  // namespace

int ranks_reported(const std::string& output) {
  return static_cast<int>(probe_hosts(output).size());
}

CheckRow misplaced_row(int rank, const std::string& actual, const std::string& expected) {
  return {expected, "placement",
          fmt::format("rank {} ran on {}, the hostfile puts it here; is the MPI ignoring the hostfile?", rank,
                      actual)};
}

std::vector<CheckRow> check_placement(const std::vector<std::string>& expected, const std::string& output) {
  std::map<int, std::string> ran = probe_hosts(output);
  std::vector<CheckRow> rows;
  for (std::size_t rank = 0; rank < expected.size(); ++rank) {
    auto it = ran.find(static_cast<int>(rank));
    if (it == ran.end()) {
      rows.push_back({expected[rank], "placement", fmt::format("rank {} did not report where it ran", rank)});
    } else if (short_name(it->second) != short_name(expected[rank])) {
      rows.push_back(misplaced_row(static_cast<int>(rank), it->second, expected[rank]));
    }
  }
  return rows;
}

// Every cell is outside text (an ssh server's disconnect message, mpirun's output, a
// culprit's name): cut, and made printable as the log makes a message (control characters
// and invalid UTF-8 as \xNN, a line break followed by the log's continuation), so that no
// peer writes a record of its own into the launcher's output.
std::string render_table(const std::vector<CheckRow>& rows) {
  auto cell = [](const std::string& text, std::size_t max) {
    return log::printable(truncate_utf8(text, max, "..."));
  };
  std::vector<CheckRow> shown;
  std::size_t host_width = 4, check_width = 5;
  for (const auto& row : rows) {
    shown.push_back({cell(row.host, 253), cell(row.check, 64), cell(row.reason, 1024)});
    host_width = std::max(host_width, shown.back().host.size());
    check_width = std::max(check_width, shown.back().check.size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {}\n", "HOST", host_width, "CHECK", check_width, "REASON");
  for (const auto& row : shown)
    out += fmt::format("{:<{}}  {:<{}}  {}\n", row.host, host_width, row.check, check_width, row.reason);
  return out;
}

}  // namespace tmpi::launch

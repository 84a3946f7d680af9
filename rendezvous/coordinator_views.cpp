// The coordinator's views of itself (see coordinator.h): the summary line that waiting
// prints, GET /v1/hosts (the health table that `mpi-launcher hosts` and report.json show)
// and GET /metrics (Prometheus text). They read the engine's state and change nothing; they
// live apart from the request handlers so that each file reads as one thing.
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "rendezvous/coordinator.h"

namespace tmpi::rdv {

using nlohmann::json;

std::string Coordinator::summary(std::size_t max_named) const {
  std::vector<std::string> missing;
  std::size_t not_ready = 0;
  for (const auto& [name, entry] : hosts_) {
    if (entry.state == HostState::kReady) continue;
    ++not_ready;
    if (missing.size() < max_named) missing.push_back(fmt::format("{} ({})", name, entry.reason));
  }
  std::string out = fmt::format("{}/{} hosts ready", ready_count(), hosts_.size());
  if (!missing.empty()) out += fmt::format("; waiting for {}", fmt::join(missing, ", "));
  if (not_ready > missing.size()) out += fmt::format(" and {} more", not_ready - missing.size());
  return out;
}

std::string Coordinator::hosts_json(Clock::time_point now) const {
  json hosts = json::array();
  for (const auto& [name, entry] : hosts_) {
    hosts.push_back({{"name", name},
                     {"state", state_name(entry.state)},
                     {"reason", entry.reason},
                     {"address", entry.address},
                     {"slots", entry.slots},
                     {"gpus", entry.gpus},
                     {"version", entry.version},
                     {"lastBeatMillisAgo",
                      entry.last_beat == Clock::time_point{} ? -1 : ms_between(entry.last_beat, now)}});
  }
  return json{{"barrier", barrier_open_ ? "open" : (deadline_passed_ ? "timed-out" : "waiting")},
              {"jobEnded", job_ended_},
              {"ready", ready_count()},
              {"expected", hosts_.size()},
              {"hosts", hosts}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Coordinator::metrics() const {
  std::map<std::string, int> by_state = {{"waiting", 0}, {"ssh-failed", 0}, {"ready", 0}, {"lost", 0}};
  for (const auto& [name, entry] : hosts_) ++by_state[state_name(entry.state)];
  std::string out =
      "# HELP tmpi_rendezvous_hosts Hosts of the job by state.\n# TYPE tmpi_rendezvous_hosts gauge\n";
  for (const auto& [state, count] : by_state)
    out += fmt::format("tmpi_rendezvous_hosts{{state=\"{}\"}} {}\n", state, count);
  out +=
      "# HELP tmpi_rendezvous_barrier_open 1 once every host is ready.\n# TYPE tmpi_rendezvous_barrier_open "
      "gauge\n";
  out += fmt::format("tmpi_rendezvous_barrier_open {}\n", barrier_open_ ? 1 : 0);
  std::map<std::string, long long> counters = counters_;
  counters["connections_evicted"] = server_counts_.evicted;
  counters["connections_refused"] = server_counts_.refused;
  counters["connections_refused_per_address"] = server_counts_.refused_per_peer;
  counters["accept_failures"] = server_counts_.accept_failures;
  for (const auto& [name, value] : counters) {
    out += fmt::format(
        "# HELP tmpi_rendezvous_{0}_total Rendezvous {0} since start.\n# TYPE tmpi_rendezvous_{0}_total "
        "counter\n",
        name);
    out += fmt::format("tmpi_rendezvous_{}_total {}\n", name, value);
  }
  return out;
}

}  // namespace tmpi::rdv

// Topology from an existing hostfile (Trainer's /etc/mpi/hostfile, mpi-operator's, or a
// hand-written one) and from a static spec. Both know only names, so addresses stay empty
// and the group, job and pod indexes come from the JobSet naming scheme where it fits.
//
// Hostfile lines: "host", "host slots=N [max_slots=M]" (Open MPI, PRRTE, DeepSpeed) or
// "host:N" (MPICH, Intel hydra); "#" starts a comment.
#include <charconv>
#include <cstdint>
#include <map>
#include <sstream>

#include "common/utf8.h"
#include "initcontainer/sources.h"

namespace tmpi::init {

namespace {

Expected<int> parse_slots(std::string_view text, std::string_view where) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range || (ec == std::errc{} && value > kMaxSlotsPerHost)) {
    return make_error(Exit::kData, "{}: slots={}; a host has from 1 to {} slots", where,
                      truncate_utf8(text, 20, "..."), kMaxSlotsPerHost);
  }
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    return make_error(Exit::kData, "{}: slots '{}' is not a whole number; write e.g. slots=8", where, text);
  }
  if (value < 1) {
    return make_error(Exit::kData, "{}: slots={}; slots must be 1 or more", where, value);
  }
  return value;
}

std::string_view trim(std::string_view text) {
  auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

void classify(Host& host, const SourceOptions& options) {
  host.role = PodRole::kNode;
  if (parse_jobset_hostname(host.name, options.jobset, host) && host.group == options.launcher_job) {
    host.role = PodRole::kLauncher;
  }
}

}  // namespace

bool parse_jobset_hostname(std::string_view name, std::string_view jobset, Host& out) {
  std::string_view short_name = name.substr(0, name.find('.'));
  if (jobset.empty() || short_name.size() <= jobset.size() + 1 ||
      short_name.substr(0, jobset.size() + 1) != std::string(jobset) + "-") {
    return false;
  }
  std::string_view tail = short_name.substr(jobset.size() + 1);  // "<rjob>-<j>-<p>"
  auto last = tail.rfind('-');
  if (last == std::string_view::npos || last == 0) return false;
  auto middle = tail.rfind('-', last - 1);
  if (middle == std::string_view::npos || middle == 0) return false;
  int job = 0, pod = 0;
  auto j = tail.substr(middle + 1, last - middle - 1), p = tail.substr(last + 1);
  if (std::from_chars(j.data(), j.data() + j.size(), job).ptr != j.data() + j.size() || j.empty())
    return false;
  if (std::from_chars(p.data(), p.data() + p.size(), pod).ptr != p.data() + p.size() || p.empty())
    return false;
  out.group = std::string(tail.substr(0, middle));
  out.job_index = job;
  out.pod_index = pod;
  return true;
}

Expected<Topology> topology_from_hostfile(std::string_view text, std::string_view origin,
                                          const SourceOptions& options) {
  Topology topology;
  topology.jobset = options.jobset;
  std::map<std::string, int> first_line;
  std::istringstream in{std::string(text)};
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    std::string_view line = trim(std::string_view(raw).substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::string where = fmt::format("{} line {}", origin, number);
    std::istringstream words{std::string(line)};
    std::string word;
    words >> word;
    Host host;
    host.name = word;
    if (auto colon = word.find(':'); colon != std::string::npos) {  // hydra "host:N"
      host.name = word.substr(0, colon);
      TMPI_ASSIGN(host.slots, parse_slots(std::string_view(word).substr(colon + 1), where));
    }
    while (words >> word) {
      auto eq = word.find('=');
      std::string key = word.substr(0, eq);
      if (eq == std::string::npos) {
        return make_error(Exit::kData, "{}: unexpected '{}'; a line is 'host slots=N' or 'host:N'", where,
                          word);
      }
      if (key == "slots") {
        TMPI_ASSIGN(host.slots, parse_slots(std::string_view(word).substr(eq + 1), where));
      } else if (key != "max_slots" && key != "max-slots") {
        return make_error(Exit::kData, "{}: unknown setting '{}'; only slots and max_slots are read", where,
                          key);
      }
    }
    if (host.name.empty()) return make_error(Exit::kData, "{}: empty host name", where);
    if (auto [it, fresh] = first_line.try_emplace(host.name, number); !fresh) {
      return make_error(Exit::kData,
                        "{}: host {} was already listed on line {}; list each host once "
                        "with its total slots",
                        where, host.name, it->second);
    }
    if (options.slots) host.slots = *options.slots;
    classify(host, options);
    if (topology.subdomain.empty() && host.name.find('.') != std::string::npos) {
      topology.subdomain = host.name.substr(host.name.find('.') + 1);
    }
    if (host.role == PodRole::kLauncher) {
      topology.launcher = host;
      if (!options.launcher_as_node) continue;
      // First, as the pod-list source has it: mpirun maps its own host first whatever its place
      // in the hostfile, and Trainer's hostfile lists it in the runtime's order of jobs
      // (its own runtimes: last).
      topology.hosts.insert(topology.hosts.begin(), std::move(host));
      continue;
    }
    topology.hosts.push_back(std::move(host));
  }
  // Trainer lists the launcher only when runLauncherAsNode is on. A hostfile without it
  // would run the job on the node pods alone, while the launcher's own sidecar is refused:
  // the runtime and this flag disagree, which is an error, not a smaller job.
  if (options.launcher_as_node && !options.jobset.empty() && !topology.launcher) {
    return make_error(Exit::kData,
                      "{}: --launcher-as-node, but no line names the launcher ({}-{}-0-0); Trainer writes it "
                      "only with runLauncherAsNode: true: set it in the runtime, or drop --launcher-as-node",
                      origin, options.jobset, options.launcher_job);
  }
  TMPI_CHECK(validate_topology(topology, origin));
  return topology;
}

Expected<Topology> topology_from_static(const std::vector<std::string>& replicated_jobs,
                                        const SourceOptions& options) {
  if (options.jobset.empty()) {
    return make_error(Exit::kUsage,
                      "--replicated-jobs needs --jobset NAME: host names are "
                      "<jobset>-<rjob>-<jobIdx>-<podIdx>.<subdomain>");
  }
  Topology topology;
  topology.jobset = options.jobset;
  topology.subdomain = options.subdomain.empty() ? options.jobset : options.subdomain;
  for (const auto& entry : replicated_jobs) {
    auto eq = entry.find('=');
    std::string where = fmt::format("--replicated-jobs entry '{}'", entry);
    if (eq == std::string::npos || eq == 0) {
      return make_error(Exit::kUsage, "{}: write NAME=PODS or NAME=JOBSxPODS, e.g. node=4", where);
    }
    std::string group = entry.substr(0, eq), counts = entry.substr(eq + 1);
    int jobs = 1;
    if (auto x = counts.find('x'); x != std::string::npos) {
      TMPI_ASSIGN(jobs, parse_slots(std::string_view(counts).substr(0, x), where));
      counts = counts.substr(x + 1);
    }
    TMPI_ASSIGN(int pods, parse_slots(counts, where));
    if (static_cast<std::int64_t>(jobs) * pods + static_cast<std::int64_t>(topology.hosts.size()) >
        static_cast<std::int64_t>(kMaxHosts)) {
      return make_error(Exit::kUsage, "{}: {} pods; a job has at most {} hosts", where,
                        static_cast<std::int64_t>(jobs) * pods, kMaxHosts);
    }
    for (int j = 0; j < jobs; ++j) {
      for (int p = 0; p < pods; ++p) {
        Host host;
        host.name = fmt::format("{}-{}-{}-{}.{}", options.jobset, group, j, p, topology.subdomain);
        host.group = group;
        host.job_index = j;
        host.pod_index = p;
        host.slots = options.slots.value_or(1);
        host.role = group == options.launcher_job ? PodRole::kLauncher : PodRole::kNode;
        if (host.role == PodRole::kLauncher) {
          topology.launcher = host;
          if (!options.launcher_as_node) continue;
        }
        topology.hosts.push_back(std::move(host));
      }
    }
  }
  TMPI_CHECK(validate_topology(topology, "--replicated-jobs"));
  return topology;
}

}  // namespace tmpi::init

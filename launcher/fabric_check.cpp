// See fabric_check.h.
#include "launcher/fabric_check.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/json_fields.h"
#include "common/param_names.h"
#include "common/params.h"
#include "common/process.h"
#include "launcher/fabric_timeout.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {

namespace {

constexpr std::string_view kReportPrefix = "nccl-check report: ";
// A rank that gave up inside a blocking MPI call says so on a line of its own
// (ncclcheck/main.cpp, give_up): the ranks that never say it are the silent ones.
constexpr std::string_view kGaveUpPrefix = "nccl-check timeout: ";
// A rank whose watchdog stood still this long said its line only when mpirun's abort woke
// it (SIGCONT, ncclcheck/watchdog.h): it was stopped, and counts as silent. A live rank on a
// busy machine stands still a fraction of a second.
constexpr double kStoodStillSeconds = 3.0;

// The flavour's nccl-check beside this mpi-launcher (an image and the bundle install both
// in one folder), else on PATH.
std::string default_program(Flavour flavour) {
  std::string name = nccl_check_name(flavour);
  std::string beside = beside_self(name);
  return beside.empty() ? name : beside;
}

// The strings of an array field, skipping what is not a string: the report came through
// mpirun's output, so it is read as input from outside (common/json_fields.h).
std::vector<std::string> strings_at(const nlohmann::json& doc, std::string_view pointer) {
  std::vector<std::string> out;
  const auto* array = node_at(doc, pointer);
  if (array == nullptr || !array->is_array()) return out;
  for (const auto& item : *array) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

// The hosts that did not answer: by the placement when nccl-check gives the ranks, else
// the names that nccl-check itself knew.
std::vector<std::string> silent_hosts(const nlohmann::json& timeout,
                                      const std::vector<std::string>& placement) {
  std::vector<std::int64_t> ranks;
  if (const auto* array = node_at(timeout, "/silent_ranks"); array != nullptr && array->is_array()) {
    for (const auto& item : *array) {
      if (item.is_number_integer()) ranks.push_back(item.get<std::int64_t>());
    }
  }
  if (ranks.empty() || placement.empty()) return strings_at(timeout, "/silent_hosts");
  std::set<std::string> hosts;
  for (std::int64_t rank : ranks) {
    bool placed = rank >= 0 && rank < static_cast<std::int64_t>(placement.size());
    hosts.insert(placed ? short_host(placement[static_cast<std::size_t>(rank)])
                        : fmt::format("rank {}", rank));
  }
  return {hosts.begin(), hosts.end()};
}

// The ranks of the job that did not give up, by their placed host: they never reached
// the blocking call, or never left a stopped one.
std::vector<std::string> hosts_not_in(const std::set<std::int64_t>& gave_up,
                                      const std::vector<std::string>& placement) {
  std::set<std::string> hosts;
  for (std::size_t rank = 0; rank < placement.size(); ++rank) {
    if (!gave_up.contains(static_cast<std::int64_t>(rank))) hosts.insert(short_host(placement[rank]));
  }
  return {hosts.begin(), hosts.end()};
}

// The rows of a check that timed out: from every rank's view where they gave one
// (fabric_timeout.h); else the hosts that said nothing, or stood still, are the silent ones
// (exit 75); else every rank was alive and gave up, and which noticed first says nothing of
// where the fault is: no host is named alone (exit 69, every host a candidate).
TimeoutVerdict timeout_verdict(const nlohmann::json& timeout, const std::vector<nlohmann::json>& views,
                               const std::set<std::int64_t>& gave_up,
                               const std::vector<std::string>& placement, const std::string& backend) {
  std::string reason =
      fmt::format("{} did not finish within {} s (seen by rank {})", string_at(timeout, "/step"),
                  number_at(timeout, "/after_seconds", 0.0), int_at(timeout, "/rank", -1));
  if (TimeoutVerdict localised = localise_timeout(views, placement, backend, reason); !localised.rows.empty())
    return localised;
  TimeoutVerdict out;
  out.exit = Exit::kTempFail;
  auto silent = silent_hosts(timeout, placement);
  if (silent.empty() && !gave_up.empty()) silent = hosts_not_in(gave_up, placement);
  for (const auto& host : silent)
    out.rows.push_back({host, backend + " timeout", reason + "; this host does not answer"});
  if (!silent.empty()) return out;
  out.exit = Exit::kUnavailable;
  auto hosts = hosts_not_in({}, placement);
  if (hosts.empty()) hosts.push_back(string_at(timeout, "/host"));
  for (const auto& host : hosts) {
    out.rows.push_back(
        {host, backend + " not localised",
         reason + fmt::format("; every rank was alive and gave up, so no host is known at fault: "
                              "any of {} could be",
                              fmt::join(hosts, ", "))});
  }
  return out;
}

}  // namespace

FabricBackend fabric_backend(FabricBackend check, const Topology& topology, int launcher_gpus) {
  if (check != FabricBackend::kAuto) return check;
  if (topology.hosts.empty()) return FabricBackend::kMpi;
  bool known = std::any_of(topology.hosts.begin(), topology.hosts.end(),
                           [](const Host& host) { return host.gpus > 0; });
  if (!known) return launcher_gpus > 0 ? FabricBackend::kNccl : FabricBackend::kMpi;
  bool every = std::all_of(topology.hosts.begin(), topology.hosts.end(),
                           [](const Host& host) { return host.gpus > 0; });
  return every ? FabricBackend::kNccl : FabricBackend::kMpi;
}

int visible_gpus(const std::string& devices_dir, std::string_view nvidia_visible_devices) {
  if (nvidia_visible_devices == "void" || nvidia_visible_devices == "none") return 0;
  std::error_code error;
  std::filesystem::directory_iterator entries(devices_dir, error);
  if (error) return 0;
  int count = 0;
  for (const auto& entry : entries) {
    std::string name = entry.path().filename().string();
    // nvidia0, nvidia1, ...: not nvidiactl, nvidia-uvm or nvidia-modeset, which every
    // container on a GPU node may be given without a GPU of its own.
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      ++count;
  }
  return count;
}

std::string nccl_check_name(Flavour flavour) {
  return flavour == Flavour::kMpich || flavour == Flavour::kIntel ? "nccl-check.mpich" : "nccl-check";
}

std::vector<std::string> fabric_check_command(const FabricOptions& options, FabricBackend backend,
                                              Flavour flavour) {
  std::vector<std::string> command = {options.program.empty() ? default_program(flavour) : options.program,
                                      "--backend", std::string(choice_name(backend, kFabricBackendSpellings)),
                                      "--json", "-"};
  command.insert(command.end(), options.passed_on.begin(), options.passed_on.end());
  return command;
}

FabricCheck read_fabric_check(const std::string& output, int status, const std::string& launcher_host,
                              const std::vector<std::string>& placement) {
  FabricCheck out;
  std::istringstream lines(output);
  std::string line;
  std::set<std::int64_t> gave_up;  // the ranks that said they gave up in a blocking call
  nlohmann::json first_gave_up;
  std::vector<nlohmann::json> views;  // what each rank that gave up said (fabric_timeout.h)
  while (std::getline(lines, line)) {
    // Found anywhere in the line too, for the same reason as the report (below).
    if (auto at = line.find(kGaveUpPrefix); at != std::string::npos) {
      if (at > 0) out.table += line.substr(0, at) + "\n";
      auto said = nlohmann::json::parse(line.substr(at + kGaveUpPrefix.size()), nullptr, false);
      if (said.is_object() && node_at(said, "/rank") != nullptr && said["rank"].is_number_integer() &&
          number_at(said, "/stood_still_seconds", 0.0) < kStoodStillSeconds) {
        gave_up.insert(said["rank"].get<std::int64_t>());
        views.push_back(said);
        if (first_gave_up.is_null()) first_gave_up = std::move(said);
      }
      continue;
    }
    // The report may follow another stream's text that mpirun forwarded without its line
    // break: it is found anywhere in the line, and what comes before it stays in the table.
    auto at = line.find(kReportPrefix);
    if (at == std::string::npos) {
      out.table += line + "\n";
      continue;
    }
    if (at > 0) out.table += line.substr(0, at) + "\n";
    auto report = nlohmann::json::parse(line.substr(at + kReportPrefix.size()), nullptr, false);
    if (!report.is_discarded() && out.report.is_null()) out.report = std::move(report);  // the first one wins
  }
  if (!out.report.is_object() && !first_gave_up.is_null()) {  // rank 0 is among the silent
    out.report = {{"result", "timeout"},
                  {"backend", string_at(first_gave_up, "/backend", "nccl-check")},
                  {"timeout", first_gave_up}};
  }
  const auto& report = out.report;
  if (report.is_object() && string_at(report, "/result") == "pass" && status == 0) return out;
  // The image has no NCCL: no restart brings it, so not the 69 that the runtimes restart on.
  bool no_nccl = status == static_cast<int>(Exit::kConfig) ||
                 (report.is_object() && int_at(report, "/exit_code", 0) == static_cast<int>(Exit::kConfig));
  out.exit = no_nccl ? Exit::kConfig : Exit::kUnavailable;
  if (!report.is_object()) {
    std::string tail = out.table.size() > 600 ? "..." + out.table.substr(out.table.size() - 600) : out.table;
    out.rows.push_back(
        {launcher_host, "nccl-check", fmt::format("exited with status {} and no report: {}", status, tail)});
    return out;
  }
  std::string backend = string_at(report, "/backend", "nccl-check");
  if (const auto* culprits = node_at(report, "/culprits"); culprits != nullptr && culprits->is_array()) {
    for (const auto& culprit : *culprits) {
      out.rows.push_back({string_at(culprit, "/name"), backend + " " + string_at(culprit, "/kind"),
                          string_at(culprit, "/reason")});
    }
  }
  if (std::string failure = string_at(report, "/failure"); !failure.empty())
    out.rows.push_back({launcher_host, backend, failure});
  const auto* timeout = node_at(report, "/timeout");
  // Ranks that gave up only in MPI_Finalize did so after rank 0 had its verdict out (MPICH's
  // finalize, draining what a slow link still holds, was seen to take a minute): the verdict
  // stands, and the hang names no host of its own.
  const bool after_verdict =
      string_at(report, "/result") == "fail" && std::all_of(views.begin(), views.end(), [](const auto& view) {
        return string_at(view, "/step") == "MPI_Finalize";
      });
  if ((timeout == nullptr || !timeout->is_object()) && !first_gave_up.is_null() && !after_verdict)
    timeout = &first_gave_up;
  if (timeout != nullptr && timeout->is_object()) {
    TimeoutVerdict verdict = timeout_verdict(*timeout, views, gave_up, placement, backend);
    out.exit = verdict.exit;
    out.rows.insert(out.rows.end(), verdict.rows.begin(), verdict.rows.end());
  }
  if (out.rows.empty()) {
    out.rows.push_back({launcher_host, backend, fmt::format("nccl-check exited with status {}", status)});
  }
  return out;
}

Expected<FabricCheck> run_fabric_check(const FabricOptions& options, const Job& job, FabricBackend backend,
                                       const std::function<bool()>& stopped) {
  LaunchPlan plan = plan_for(job, fabric_check_command(options, backend, job.plan.flavour), {});
  auto ran = run_capture(build_command(plan), job.env, options.step_timeout * 20, stopped);
  if (!ran && stopped && stopped()) return ran.take_error();
  if (!ran) {
    return make_error(ran.error().exit, "nccl-check ({}): {}; raise {}, or use --check none{}",
                      choice_name(backend, kFabricBackendSpellings), ran.error().message,
                      env_name(param::kStepTimeout.name), trouble_note(Trouble::kFabricCheckFailed));
  }
  return read_fabric_check(ran->output, ran->status, job.launcher_name,
                           expected_placement(job.topology, job.plan.np));
}

}  // namespace tmpi::launch

// See fabric_check.h.
#include "launcher/fabric_check.h"

#include <set>
#include <sstream>

#include <fmt/format.h>

#include "launcher/process.h"

namespace tmpi::launch {

namespace {

constexpr std::string_view kReportPrefix = "nccl-check report: ";

// nccl-check beside this mpi-launcher (an image installs both in one folder), else PATH.
std::string default_program() {
  std::string beside = beside_self("nccl-check");
  return beside.empty() ? "nccl-check" : beside;
}

// The pod's hostname, as nccl-check's ranks report theirs.
std::string short_host(const std::string& name) {
  return name.substr(0, name.find('.'));
}

// The hosts that did not answer: by the placement when nccl-check gives the ranks, else
// the names that nccl-check itself knew.
std::vector<std::string> silent_hosts(const nlohmann::json& timeout,
                                      const std::vector<std::string>& placement) {
  auto ranks = timeout.value("silent_ranks", std::vector<int>{});
  if (ranks.empty() || placement.empty()) return timeout.value("silent_hosts", std::vector<std::string>{});
  std::set<std::string> hosts;
  for (int rank : ranks) {
    bool placed = rank >= 0 && rank < static_cast<int>(placement.size());
    hosts.insert(placed ? short_host(placement[static_cast<std::size_t>(rank)])
                        : fmt::format("rank {}", rank));
  }
  return {hosts.begin(), hosts.end()};
}

}  // namespace

std::string fabric_backend(const std::string& check, const Topology& topology) {
  if (check != "auto") return check;
  for (const auto& host : topology.hosts) {
    if (host.gpus <= 0) return "mpi";
  }
  return topology.hosts.empty() ? "mpi" : "nccl";
}

std::vector<std::string> fabric_check_command(const Params& params, const std::string& program,
                                              const std::string& backend) {
  std::vector<std::string> command = {program.empty() ? default_program() : program, "--backend", backend,
                                      "--json", "-"};
  // What the user set is passed on; the rest keeps nccl-check's own defaults, some of which
  // depend on the backend (--max-bytes).
  for (const char* name : {"min-bytes", "max-bytes", "step-factor", "pair-bytes", "iters", "warmup",
                           "min-busbw", "min-fraction", "step-timeout", "log-level"}) {
    if (!params.is_set(name)) continue;
    command.push_back(fmt::format("--{}", name));
    command.push_back(params.str(name));
  }
  return command;
}

FabricCheck read_fabric_check(const std::string& output, int status, const std::string& launcher_host,
                              const std::vector<std::string>& placement) {
  FabricCheck out;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(kReportPrefix, 0) == 0) {
      auto report = nlohmann::json::parse(line.substr(kReportPrefix.size()), nullptr, false);
      if (!report.is_discarded() && out.report.is_null())
        out.report = std::move(report);  // the first one wins
    } else {
      out.table += line + "\n";
    }
  }
  const auto& report = out.report;
  if (report.is_object() && report.value("result", "") == "pass" && status == 0) return out;
  out.exit = Exit::kUnavailable;
  if (!report.is_object()) {
    std::string tail = out.table.size() > 600 ? "..." + out.table.substr(out.table.size() - 600) : out.table;
    out.rows.push_back(
        {launcher_host, "nccl-check", fmt::format("exited with status {} and no report: {}", status, tail)});
    return out;
  }
  std::string backend = report.value("backend", "nccl-check");
  for (const auto& culprit : report.value("culprits", nlohmann::json::array())) {
    out.rows.push_back(
        {culprit.value("name", ""), backend + " " + culprit.value("kind", ""), culprit.value("reason", "")});
  }
  if (report.contains("failure"))
    out.rows.push_back({launcher_host, backend, report["failure"].get<std::string>()});
  if (report.contains("timeout")) {
    const auto& timeout = report["timeout"];
    out.exit = Exit::kTempFail;
    std::string reason =
        fmt::format("{} did not finish within {} s (seen by rank {})", timeout.value("step", ""),
                    timeout.value("after_seconds", 0.0), timeout.value("rank", -1));
    auto silent = silent_hosts(timeout, placement);
    if (silent.empty()) out.rows.push_back({timeout.value("host", ""), backend + " timeout", reason});
    for (const auto& host : silent)
      out.rows.push_back({host, backend + " timeout", reason + "; this host does not answer"});
  }
  if (out.rows.empty()) {
    out.rows.push_back({launcher_host, backend, fmt::format("nccl-check exited with status {}", status)});
  }
  return out;
}

Expected<FabricCheck> run_fabric_check(const Params& params, const Job& job, const std::string& backend,
                                       const std::function<bool()>& stopped) {
  LaunchPlan plan = plan_for(job, fabric_check_command(params, params.str("nccl-check"), backend), {});
  auto ran = run_capture(build_command(plan), job.env, params.duration("step-timeout") * 20, stopped);
  if (!ran && stopped && stopped()) return ran.take_error();
  if (!ran) {
    return make_error(ran.error().exit, "nccl-check ({}): {}; raise TMPI_STEP_TIMEOUT, or use --check none",
                      backend, ran.error().message);
  }
  return read_fabric_check(ran->output, ran->status, job.launcher_name,
                           expected_placement(job.topology, job.plan.np));
}

}  // namespace tmpi::launch

// See failure.h.
#include "launcher/failure.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/error.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {

std::optional<Failure> attribute_failure(const JobOutcome& outcome, const AskHosts& ask_hosts) {
  if (outcome.primary) return outcome.primary;
  if (outcome.mpirun_status != 0 || outcome.secondary) {
    // MPI stopped the job without a rank failing on its own: is a host gone?
    if (std::optional<GoneHost> gone = ask_hosts ? ask_hosts() : std::nullopt) {
      Failure lost{static_cast<int>(Exit::kTempFail), with_trouble(gone->message, Trouble::kHostLost),
                   FailureKind::kHostLost};
      lost.host = gone->host;
      return lost;
    }
  }
  if (outcome.secondary) return outcome.secondary;
  if (outcome.mpirun_status != 0) {
    // No rank reported a code of its own: mpirun's status is the job's (mpirun passes on
    // the first failed rank's code), as with plain mpirun.
    return Failure{outcome.mpirun_status,
                   fmt::format("{} exited with status {}{}", outcome.launcher, outcome.mpirun_status,
                               trouble_note(Trouble::kMpirunFailed)),
                   FailureKind::kJobFailed, true};
  }
  return std::nullopt;
}

nlohmann::json exit_record(const std::optional<Failure>& failure) {
  if (!failure) {
    return {{"code", 0},
            {"side", "launcher"},
            {"name", "ok"},
            {"retry", false},
            {"reason", "every rank exited 0"},
            {"troubleshooting", nullptr}};
  }
  const ExitInfo* info = failure->from_job ? nullptr : exit_info(failure->code);
  // The key is read back from the reason, where the message's maker put it (trouble_keys.h).
  const std::optional<std::string_view> key = trouble_key_in(failure->reason);
  return {{"code", failure->code},
          {"side", failure->from_job ? "job" : "launcher"},
          {"name", info != nullptr ? info->name : (failure->from_job ? "job" : "stopped")},
          {"retry", info != nullptr && info->retry},
          {"reason", failure->reason},
          {"troubleshooting", key ? nlohmann::json(std::string(*key)) : nlohmann::json(nullptr)}};
}

nlohmann::json rank_json(const RankRecord& record) {
  nlohmann::json json = {
      {"rank", record.rank},
      {"host", record.host},
      {"state", record.exited ? "exited" : "running"},
      {"code", record.code},
      {"signal", record.signal},
      {"seconds", record.seconds ? nlohmann::json(*record.seconds) : nlohmann::json(nullptr)},
      {"reported", record.reported}};
  if (record.left_processes) json["leftProcesses"] = true;
  return json;
}

Failure past_timeout(Millis timeout, const nlohmann::json& ranks) {
  std::vector<std::string> running;
  std::size_t more = 0;
  for (const auto& rank : ranks) {
    if (!rank.is_object() || rank.value("state", "") != "running") continue;
    if (running.size() < 8) {
      running.push_back(fmt::format("rank {} on {}", rank.value("rank", -1), rank.value("host", "?")));
    } else {
      ++more;
    }
  }
  std::string named =
      running.empty() ? "no rank had reported its start" : fmt::format("{}", fmt::join(running, ", "));
  if (more > 0) named += fmt::format(" and {} more", more);
  return Failure{static_cast<int>(Exit::kTempFail),
                 fmt::format("the job ran past --timeout ({} s); still running: {}{}", timeout.count() / 1000,
                             named, trouble_note(Trouble::kJobTimeout)),
                 FailureKind::kJobTimeout};
}

void report_strays(int strays, bool job_failed, std::string_view launcher) {
  if (strays <= 0) return;
  spdlog::log(job_failed ? spdlog::level::info : spdlog::level::debug,
              "ended {} process(es) that {} left behind (its ssh sessions, in process groups of their own)",
              strays, launcher);
}

}  // namespace tmpi::launch

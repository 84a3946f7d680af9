// See restarts.h.
#include "launcher/restarts.h"

#include <algorithm>
#include <charconv>
#include <csignal>

#include <fmt/format.h>

#include "common/utf8.h"

namespace tmpi::launch {

Expected<std::vector<int>> parse_exit_codes(const std::vector<std::string>& words, std::string_view where) {
  std::vector<int> codes;
  for (const std::string& word : words) {
    int code = 0;
    const char* end = word.data() + word.size();
    auto [stop, error] = std::from_chars(word.data(), end, code);
    if (word.empty() || error != std::errc() || stop != end || code < 1 || code > 255) {
      return make_error(Exit::kUsage,
                        "{}: '{}' is not an exit code; give codes 1..255 of the program's own, separated by "
                        "commas (e.g. 3,42)",
                        where, truncate_utf8(valid_utf8(word), 64, "..."));
    }
    if (std::find(codes.begin(), codes.end(), code) == codes.end()) codes.push_back(code);
  }
  return codes;
}

std::optional<RestartCause> restart_cause(const Failure& failure, const std::vector<int>& retryable_exits) {
  switch (failure.event) {
    case FailureKind::kHostLost:
      return RestartCause::kHostLost;
    case FailureKind::kPreflightFailed:
      // Only the fabric check's verdict (69 or 75): a host that refuses the job key, or a name
      // that does not resolve, is a setup fault that the same pods will show again.
      if (failure.fabric && (failure.code == static_cast<int>(Exit::kUnavailable) ||
                             failure.code == static_cast<int>(Exit::kTempFail)))
        return RestartCause::kFabricFault;
      return std::nullopt;
    case FailureKind::kRankFailed:
      // Its cgroup counted an OOM kill (by signal, or a shell's 137): the program's, whatever
      // the user listed; it would only run out of memory again.
      if (failure.oom_killed) return std::nullopt;
      // SIGKILL from outside the job (the kubelet, a person) or SIGBUS (a memory fault): not the
      // program's doing, unless the kernel's OOM killer sent it, which its cgroup counts.
      if ((failure.signal == SIGKILL && !failure.oom_killed) || failure.signal == SIGBUS)
        return RestartCause::kRankKilled;
      if (failure.signal == 0 &&
          std::find(retryable_exits.begin(), retryable_exits.end(), failure.code) != retryable_exits.end())
        return RestartCause::kRetryableExit;
      return std::nullopt;
    case FailureKind::kJobFailed:
    case FailureKind::kRankMisplaced:
    case FailureKind::kRendezvousTimeout:
    case FailureKind::kJobStopped:
    case FailureKind::kJobTimeout:
      return std::nullopt;
  }
  return std::nullopt;
}

std::vector<int> ranks_running_on_live_hosts(const nlohmann::json& snapshot) {
  if (!snapshot.is_object()) return {};
  std::vector<std::string> lost;
  for (const nlohmann::json& host : snapshot.value("hosts", nlohmann::json::array())) {
    if (!host.is_object() || host.value("state", "") != "lost") continue;
    const std::string name = host.value("name", "");
    lost.push_back(name.substr(0, name.find('.')));
  }
  std::vector<int> running;
  for (const nlohmann::json& rank : snapshot.value("ranks", nlohmann::json::array())) {
    if (!rank.is_object() || rank.value("state", "") != "running") continue;
    const std::string host = rank.value("host", "");
    if (std::find(lost.begin(), lost.end(), host.substr(0, host.find('.'))) == lost.end())
      running.push_back(rank.value("rank", -1));
  }
  return running;
}

bool every_rank_ended(const nlohmann::json& snapshot, int np) {
  if (!snapshot.is_object() || np <= 0) return false;
  std::vector<bool> ended(static_cast<std::size_t>(np), false);
  int count = 0;
  for (const nlohmann::json& rank : snapshot.value("ranks", nlohmann::json::array())) {
    if (!rank.is_object() || rank.value("state", "") != "exited") continue;
    if (rank.value("leftProcesses", false)) return false;  // its agent is still ending them
    const int number = rank.value("rank", -1);
    if (number < 0 || number >= np || ended[static_cast<std::size_t>(number)]) continue;
    ended[static_cast<std::size_t>(number)] = true;
    ++count;
  }
  return count == np;
}

bool recheck_fabric(RestartCause cause) {
  return cause == RestartCause::kHostLost || cause == RestartCause::kFabricFault;
}

int RestartBudget::in_window(Clock::time_point now) const {
  if (window_.count() <= 0) return static_cast<int>(spent_.size());
  return static_cast<int>(
      std::count_if(spent_.begin(), spent_.end(), [&](Clock::time_point at) { return now - at < window_; }));
}

bool RestartBudget::allows(Clock::time_point now) const {
  return restarts_ > 0 && in_window(now) < restarts_;
}

nlohmann::json attempts_json(const std::vector<AttemptRecord>& attempts) {
  nlohmann::json rows = nlohmann::json::array();
  for (const AttemptRecord& attempt : attempts) {
    rows.push_back({{"attempt", attempt.attempt},
                    {"cause", attempt.cause ? nlohmann::json(std::string(
                                                  choice_name(*attempt.cause, kRestartCauseSpellings)))
                                            : nlohmann::json(nullptr)},
                    {"code", attempt.code},
                    {"reason", attempt.reason},
                    {"failedAfter", attempt.failed_after},
                    {"resumedAfter", attempt.resumed_after ? nlohmann::json(*attempt.resumed_after)
                                                           : nlohmann::json(nullptr)},
                    {"restarted", attempt.restarted},
                    {"stopped", attempt.stopped}});
  }
  return rows;
}

}  // namespace tmpi::launch

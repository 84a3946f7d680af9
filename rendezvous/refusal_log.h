// The log of the coordinator's refusals, rate-limited. Anyone who can reach the port can
// make it refuse requests at line rate, and one log line each (with a name of 16 KiB) made
// megabytes in seconds. So each reason (the refusal's status and route: a bounded set, from
// the code) gets one line per interval, and the refusals of that reason in between are
// counted and told in one line once the interval has passed. What a line quotes of a request
// (a host name) is a short excerpt, escaped (excerpt()). Pure: the time is given.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/utf8.h"

namespace tmpi::rdv {

// Text off the wire, for a log line: at most `max_bytes` of it (whole UTF-8 characters, "..."
// when cut), quoted and JSON-escaped, so that no control byte or newline reaches the log.
inline std::string excerpt(std::string_view text, std::size_t max_bytes = 64) {
  std::string cut = truncate_utf8(text, max_bytes, "...");
  return nlohmann::json(cut).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class RefusalLog {
 public:
  static constexpr std::size_t kMaxReasons = 64;  // beyond it (never, by the code): one "other"

  explicit RefusalLog(Millis interval = Millis(10000)) : interval_(interval) {}

  // The line to log now for a refusal of `reason`: the first of its interval (with the count
  // of those untold before it), or nullopt: counted, to be told later.
  std::optional<std::string> note(const std::string& reason, const std::string& line, Clock::time_point now) {
    std::string key = reasons_.size() < kMaxReasons || reasons_.contains(reason) ? reason : "other";
    auto [it, fresh] = reasons_.try_emplace(key, Entry{now, 0});
    Entry& entry = it->second;
    if (!fresh && now - entry.since < interval_) {
      ++entry.untold;
      return std::nullopt;
    }
    std::string out =
        entry.untold > 0 ? fmt::format("{} (and {} more like it before)", line, entry.untold) : line;
    entry = Entry{now, 0};
    return out;
  }

  // A line for each reason whose interval has passed with refusals untold.
  std::vector<std::string> flush(Clock::time_point now) {
    std::vector<std::string> lines;
    for (auto& [reason, entry] : reasons_) {
      if (entry.untold == 0 || now - entry.since < interval_) continue;
      lines.push_back(fmt::format("{} more refusals ({}) in the last {} s", entry.untold, reason,
                                  ms_between(entry.since, now) / 1000));
      entry = Entry{now, 0};
    }
    return lines;
  }

 private:
  struct Entry {
    Clock::time_point since;  // when its last line was logged
    long long untold = 0;
  };
  Millis interval_;
  std::map<std::string, Entry> reasons_;
};

}  // namespace tmpi::rdv

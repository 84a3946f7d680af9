// See admission.h. Every decision reads the tables as they are at `now`; nothing here waits,
// reads a socket or a clock of its own.
#include "nodessh/admission.h"

#include <algorithm>

#include <fmt/format.h>

namespace tmpi::nodessh {

namespace {

using std::chrono::seconds;

// OpenSSH 9.8's defaults (servconf.c): crash:90 authfail:5 noauth:1 grace-exceeded:20
// max:600 min:15.
constexpr Millis kPenaltyCrash = seconds(90);
constexpr Millis kPenaltyAuthFail = seconds(5);
constexpr Millis kPenaltyNoAuth = seconds(1);
constexpr Millis kPenaltyGrace = seconds(20);
constexpr Millis kPenaltyMax = seconds(600);
constexpr Millis kPenaltyMin = seconds(15);

Millis penalty_of(Ending ending) {
  switch (ending) {
    case Ending::kLoggedIn:
      return Millis(0);
    case Ending::kNoAuth:
      return kPenaltyNoAuth;
    case Ending::kAuthFailed:
      return kPenaltyAuthFail;
    case Ending::kGraceExceeded:
      return kPenaltyGrace;
    case Ending::kCrashed:
      return kPenaltyCrash;
  }
  return Millis(0);
}

const char* why_of(Ending ending) {
  switch (ending) {
    case Ending::kNoAuth:
      return "connections closed without trying to log in";
    case Ending::kAuthFailed:
      return "failed logins";
    case Ending::kGraceExceeded:
      return "connections past their grace";
    case Ending::kCrashed:
      return "a connection whose process crashed";
    case Ending::kLoggedIn:
      break;
  }
  return "";
}

long long whole_seconds(Millis duration) {
  return std::chrono::duration_cast<seconds>(duration + Millis(999)).count();
}

}  // namespace

Admit Admission::on_connect(const std::string& source, Clock::time_point now) {
  expire_penalties(now);
  if (Millis left = penalty_left(source, now); left > Millis(0)) {
    return {Admit::Kind::kRefuse, -1, "penalty",
            fmt::format("{}: refused for {} s more: a penalty for its failed or abandoned connections",
                        source, whole_seconds(left))};
  }
  if (logged_in_ >= limits_.max_logged_in) {
    return {Admit::Kind::kRefuse, -1, "max connections",
            fmt::format("{}: connection refused: {} are logged in, the most --sshd-max-connections allows",
                        source, logged_in_)};
  }
  if (int from_source = starting_from(source); from_source >= limits_.per_source_startups) {
    return {Admit::Kind::kRefuse, -1, "per-source startups",
            fmt::format("{}: connection refused: {} of its connections are not logged in yet, the most "
                        "--sshd-per-source-startups allows",
                        source, from_source)};
  }
  if (int open = starting(); open >= limits_.max_startups) {
    if (auto drop = drop_candidate(now)) {
      connections_[*drop].dropping = true;
      return {Admit::Kind::kAdmitDropping, *drop, "", ""};
    }
    return {Admit::Kind::kRefuse, -1, "max startups",
            fmt::format("{}: connection refused: {} connections are not logged in yet and none is idle, the "
                        "most --sshd-max-startups allows",
                        source, open)};
  }
  return {};
}

void Admission::admitted(pid_t id, const std::string& source, Clock::time_point now) {
  connections_[id] = Connection{source, now};
}

void Admission::on_banner(pid_t id) {
  auto found = connections_.find(id);
  if (found != connections_.end()) found->second.banner = true;
}

void Admission::on_login(pid_t id) {
  auto found = connections_.find(id);
  if (found == connections_.end() || found->second.logged_in) return;
  found->second.logged_in = true;
  ++logged_in_;
}

std::optional<std::string> Admission::on_end(pid_t id, Ending ending, Clock::time_point now) {
  auto found = connections_.find(id);
  if (found == connections_.end()) return std::nullopt;
  const Connection connection = found->second;
  connections_.erase(found);
  if (connection.logged_in) {
    --logged_in_;
    return std::nullopt;  // whatever came after a login, it was the job's own client
  }
  return penalise(connection.source, ending, now);
}

int Admission::starting() const {
  return static_cast<int>(std::count_if(connections_.begin(), connections_.end(), [](const auto& entry) {
    return !entry.second.logged_in && !entry.second.dropping;
  }));
}

int Admission::starting_from(const std::string& source) const {
  return static_cast<int>(std::count_if(connections_.begin(), connections_.end(), [&](const auto& entry) {
    return !entry.second.logged_in && !entry.second.dropping && entry.second.source == source;
  }));
}

// The oldest idle starting connection, else the oldest stale one.
std::optional<pid_t> Admission::drop_candidate(Clock::time_point now) const {
  std::optional<pid_t> idle, stale;
  Clock::time_point idle_at = Clock::time_point::max(), stale_at = Clock::time_point::max();
  for (const auto& [id, connection] : connections_) {
    if (connection.logged_in || connection.dropping) continue;
    if (!connection.banner && connection.accepted_at < idle_at) {
      idle = id;
      idle_at = connection.accepted_at;
    }
    if (now - connection.accepted_at >= kStaleStartup && connection.accepted_at < stale_at) {
      stale = id;
      stale_at = connection.accepted_at;
    }
  }
  return idle ? idle : stale;
}

Millis Admission::penalty_left(const std::string& source, Clock::time_point now) const {
  auto found = penalties_.find(source);
  if (found == penalties_.end() || !found->second.active || found->second.expiry <= now) return Millis(0);
  return std::chrono::duration_cast<Millis>(found->second.expiry - now);
}

// As srclimit.c's srclimit_penalise: a new entry runs from now; an existing one grows by the
// penalty, up to the maximum from now; an entry becomes active once more than the minimum is
// left, and stays so until it expires.
std::optional<std::string> Admission::penalise(const std::string& source, Ending ending,
                                               Clock::time_point now) {
  const Millis penalty = penalty_of(ending);
  if (penalty <= Millis(0)) return std::nullopt;
  expire_penalties(now);
  auto found = penalties_.find(source);
  if (found == penalties_.end()) {
    if (penalties_.size() >= kMaxPenalisedSources) {
      auto nearest_end =
          std::min_element(penalties_.begin(), penalties_.end(),
                           [](const auto& a, const auto& b) { return a.second.expiry < b.second.expiry; });
      penalties_.erase(nearest_end);
    }
    found = penalties_.emplace(source, Penalty{now}).first;
  }
  Penalty& entry = found->second;
  entry.expiry = std::min(std::max(entry.expiry, now) + penalty, now + kPenaltyMax);
  if (entry.active || entry.expiry - now <= kPenaltyMin) return std::nullopt;
  entry.active = true;
  return fmt::format("{}: refused for {} s: a penalty for {} (the last: {} s)", source,
                     whole_seconds(std::chrono::duration_cast<Millis>(entry.expiry - now)), why_of(ending),
                     whole_seconds(penalty));
}

void Admission::expire_penalties(Clock::time_point now) {
  std::erase_if(penalties_, [&](const auto& entry) { return entry.second.expiry <= now; });
}

}  // namespace tmpi::nodessh

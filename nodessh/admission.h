// Who gets a connection process, with no I/O: mpi-sshd's answer to a stranger's load.
// nodessh/listener.cpp asks at each accept and tells what became of each connection; unit
// tests drive it with a manual time.
//
// A connection is "starting" from its accept until it logs in, and "logged in" after. The two
// are bounded apart, so that a stranger's load, which can only ever be starting connections,
// never refuses or drops a logged-in session, nor holds a slot that the job's clients need:
// - Logged in: --sshd-max-connections (256). Only a holder of the job key gets here.
// - Starting, from one address: --sshd-per-source-startups (8), as OpenSSH's
//   PerSourceMaxStartups. One address past it is refused at accept. The job's own clients
//   open one connection per daemon to start and a few probes, from the launcher's address.
// - Starting, in all: --sshd-max-startups (64), as the total of OpenSSH's MaxStartups. When
//   full, the oldest starting connection that is idle (no client banner yet) or stale (older
//   than kStaleStartup, past any honest handshake on a pod network) is dropped for the new
//   one; only when none is, the new one is refused. Unlike sshd's random early drop, a
//   client whose handshake is quick never loses it to a flood.
// - Penalties per source address, as OpenSSH 9.8's PerSourcePenalties at its defaults
//   (openssh-portable servconf.c, fill_default_server_options; srclimit.c, srclimit_penalise):
//   a starting connection that ends without logging in adds to its address's penalty: 1 s if
//   it never tried to log in, 5 s if it tried and failed, 20 s past its grace, 90 s if its
//   process crashed. Penalties accumulate up to 600 s and decay with time; an address whose
//   penalty exceeds 15 s is refused at accept until it has run down. A connection that logged
//   in costs nothing, so the job's own clients are never penalised for their probes. The
//   table is bounded (kMaxPenalisedSources); when full, the entry nearest its end goes first.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"

namespace tmpi::nodessh {

struct AdmissionLimits {
  int max_logged_in = 256;
  int max_startups = 64;
  int per_source_startups = 8;
};

// How a connection ended, as its process tells by its exit status (listener.cpp): the same
// classes as OpenSSH's preauth children (sshd.c, child_reap).
enum class Ending {
  kLoggedIn,       // it logged in: no penalty, whatever came after
  kNoAuth,         // closed before trying to log in (a banner grabber, a dropped idle one)
  kAuthFailed,     // tried to log in and did not
  kGraceExceeded,  // not logged in within its grace, or no banner within its deadline
  kCrashed,        // its process died of a signal no one sent it
};

// An unauthenticated connection older than this may be dropped for a new one when the
// starting connections are full: an honest key exchange and login on a pod network take well
// under a second, even on a loaded node.
inline constexpr Millis kStaleStartup{2000};
inline constexpr std::size_t kMaxPenalisedSources = 4096;

struct Admit {
  enum class Kind { kAdmit, kAdmitDropping, kRefuse } kind = Kind::kAdmit;
  pid_t drop = -1;      // kAdmitDropping: the starting connection to drop for this one
  std::string reason;   // kRefuse: one of a fixed set, for the rate-limited log
  std::string refusal;  // kRefuse: the line, with counts and the setting that bounds it
};

class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // A new connection from `source` (an address as endpoint_of writes it).
  Admit on_connect(const std::string& source, Clock::time_point now);
  // The connection's process `id` serves it now.
  void admitted(pid_t id, const std::string& source, Clock::time_point now);
  void on_banner(pid_t id);
  void on_login(pid_t id);
  // Its process ended. Returns a line to log when the penalty of its source became active.
  std::optional<std::string> on_end(pid_t id, Ending ending, Clock::time_point now);

  int logged_in() const { return logged_in_; }
  int starting() const;
  // The penalty left on `source`, zero when none is active.
  Millis penalty_left(const std::string& source, Clock::time_point now) const;

 private:
  struct Connection {
    std::string source;
    Clock::time_point accepted_at;
    bool banner = false;
    bool logged_in = false;
    bool dropping = false;  // told to go for a newer one: no longer counted as starting
  };
  struct Penalty {
    Clock::time_point expiry;
    bool active = false;
  };
  int starting_from(const std::string& source) const;
  std::optional<pid_t> drop_candidate(Clock::time_point now) const;
  std::optional<std::string> penalise(const std::string& source, Ending ending, Clock::time_point now);
  void expire_penalties(Clock::time_point now);

  AdmissionLimits limits_;
  std::map<pid_t, Connection> connections_;
  std::map<std::string, Penalty> penalties_;
  int logged_in_ = 0;
};

}  // namespace tmpi::nodessh

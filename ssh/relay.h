// The ssh relay: mpirun's ssh, run over the connections that the ssh check beside the launch
// has just made, so that each host costs the launch one handshake, not two.
//
// Without it, a launch with the check pays for two handshakes per host: the check's, then
// mpirun's own ssh. On this box both are sshd's CPU on the same two cores (bench/README.md:
// the handshakes were a third of plain mpirun's launch at 8 pods). With it, the check's
// libssh session to each host, once it has shown the job's host key and taken the job key,
// is kept; MPI's agent is mpi-ssh (ssh/main.cpp), which hands its command line and its stdio
// to this relay over a unix socket in a private folder; the relay opens a channel on that
// host's session and runs the command there (ssh/channel.h). So each host gets one
// handshake, as under plain mpirun, and MPI starts no ssh client at all.
//
// What it keeps of ssh's behaviour, and why:
//   - a request waits for the check's verdict on its host: mpirun may ask before the
//     handshake is done. A refused host answers "fail" with the check's reason (exit 255, as
//     ssh's failure would be); the launcher's preflight failure is what the job reports;
//   - anything it cannot serve exactly goes back to the real ssh ("fallback"): a host it
//     does not hold, another port or user, a second command to a host already in use, an
//     option it does not honour (ssh/call.h);
//   - a caller that dies (MPI's teardown kills its ssh) closes its channel;
//   - destruction ends every channel and every connection without waiting on the network
//     (a partitioned host included), within about 0.2 s.
// Only this user may connect: the folder is 0700, and the peer's uid is checked too.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/backoff.h"
#include "common/error.h"
#include "common/files.h"
#include "common/ssh_probe.h"

namespace tmpi::launch {

class SshRelay {
 public:
  // Listens for mpi-ssh; `hosts` are the names the check reports on, `port` their sshd's.
  static Expected<std::unique_ptr<SshRelay>> start(const std::vector<std::string>& hosts, int port);
  SshRelay(const SshRelay&) = delete;
  SshRelay& operator=(const SshRelay&) = delete;
  ~SshRelay();

  // For mpi-ssh, in MPI's environment (contract::kSshRelay).
  const std::string& socket_path() const { return path_; }
  // The check's verdict on `host`: its authenticated connection, or why there is none.
  void offer(const std::string& host, SshSessionPtr session);
  void refuse(const std::string& host, const std::string& problem);

  // Waits until no command runs over the relay, each ended from its own side, or `budget`
  // passes; false then. mpirun, stopped, may exit while its daemons are still ending their
  // ranks: the launcher waits for them here, where it still holds their connections, so that
  // when it exits nothing of the job runs on (cluster.launcher.rank-fails).
  bool wait_idle(Millis budget);

  struct Counts {
    int relayed = 0, fell_back = 0, failed = 0;
  };
  Counts counts() const;

  // Each host's first command that ran and exited non-zero: its status, the first bytes it
  // printed, and when it ended. One that ended before mpirun did, with no rank started, is
  // the daemon that could not start, and why in its own words (an account's nologin: "This
  // account is currently not available."), which the launcher names in place of the ssh
  // check's `exec true`. A daemon that ends after mpirun (Open MPI's orted exits 1 when it
  // loses mpirun) is not: run_steps.h's daemon_start_rows keeps only the earlier ones.
  struct FailedStart {
    std::string host;
    int status = 0;
    std::string said;
    Clock::time_point ended;  // when the relay saw it end
  };
  std::vector<FailedStart> failed_starts() const;

 private:
  struct Slot {
    std::string host;  // its name as the check reports on it
    enum class State { kPending, kReady, kRefused } state = State::kPending;
    SshSessionPtr session;
    std::string problem;
    bool busy = false;
    std::optional<FailedStart> failed;  // its first command that exited non-zero
  };
  SshRelay(std::shared_ptr<ScratchDir> dir, int listener, std::array<int, 2> wake, int port,
           const std::vector<std::string>& hosts);
  void accept_loop();
  void serve(int caller);
  Slot* find_slot(const std::string& host);  // under mutex_

  std::shared_ptr<ScratchDir> dir_;
  std::string path_;
  int listener_ = -1;
  // A pipe written once at destruction and never read: its read end, readable from then on,
  // is in every wait of the relay's threads, so that they all see stop_ at once (the launcher's
  // exit waited up to a poll slice, 100 ms, for the acceptor: half the 8-pod launch's cost
  // over plain mpirun's).
  std::array<int, 2> wake_{-1, -1};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Slot> slots_;
  std::map<std::string, std::string> short_names_;  // "node-0" -> its full name; "" if two share it
  Counts counts_;
  // One thread a request. A thread that has answered raises its flag, and is joined when the
  // next request comes (a terminated thread holds its stack until joined); those still
  // running are joined at destruction, each ending as soon as it sees stop_.
  struct Caller {
    std::jthread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Caller> callers_;
  std::jthread acceptor_;  // started by start(), once everything above exists
};

}  // namespace tmpi::launch

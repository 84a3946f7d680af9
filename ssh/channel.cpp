// See ssh/channel.h. libssh in non-blocking mode: every call returns at once (SSH_AGAIN when
// it would wait), and ssh_channel_read_nonblocking() both reads the socket and dispatches
// what came (window adjustments, exit-status, EOF, close), so the loop calls it after every
// poll, whether or not the socket was readable: libssh may hold data it has already read.
#include "ssh/channel.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <libssh/libssh.h>

#include "common/backoff.h"

namespace tmpi::launch {

namespace {

constexpr int kChannelPollMs = 100;
constexpr Millis kOpenTimeout(30000);  // the channel's open and the exec's answer, together

struct ChannelFree {
  void operator()(ssh_channel channel) const {
    if (ssh_channel_is_open(channel) != 0) ssh_channel_close(channel);
    ssh_channel_free(channel);
  }
};

// An event callback that only raises the flag it was given; the loop acts on it.
int raise_flag(socket_t /*fd*/, int /*revents*/, void* flag) {
  *static_cast<bool*>(flag) = true;
  return 0;
}

// The loop's one wait (see run_remote): an ssh_event holding the session and the descriptors
// it watches. On the way out it gives the session back (the session outlives it, for the next
// command to its host) and removes each descriptor, which is what frees libssh's record of it.
class EventLoop {
 public:
  explicit EventLoop(ssh_session session) : session_(session), event_(ssh_event_new()) {
    has_session_ = event_ != nullptr && ssh_event_add_session(event_, session_) == SSH_OK;
  }
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop() {
    if (event_ == nullptr) return;
    for (int fd : fds_) ssh_event_remove_fd(event_, fd);
    if (has_session_) ssh_event_remove_session(event_, session_);
    ssh_event_free(event_);
  }
  bool ready() const { return has_session_; }
  void watch(int fd, bool* flag) {
    if (ssh_event_add_fd(event_, fd, POLLIN, &raise_flag, flag) == SSH_OK) fds_.push_back(fd);
  }
  void unwatch(int fd) {
    ssh_event_remove_fd(event_, fd);
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
  }
  void wait(int ms) { ssh_event_dopoll(event_, ms); }

 private:
  ssh_session session_;
  ssh_event event_;
  bool has_session_ = false;
  std::vector<int> fds_;
};

// Waits up to one poll slice for the session's socket, or for `wake`.
void wait_session(ssh_session session, int wake) {
  std::array<pollfd, 2> fds{{{ssh_get_fd(session), POLLIN, 0}, {wake, POLLIN, 0}}};
  if ((ssh_get_poll_flags(session) & SSH_WRITE_PENDING) != 0) fds[0].events |= POLLOUT;
  poll(fds.data(), wake >= 0 ? 2 : 1, kChannelPollMs);
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

// Moves what the channel holds to the caller; false if the session failed.
bool drain(ssh_channel channel, const RemoteCall& call) {
  std::array<char, 32768> buffer{};
  for (int is_stderr : {0, 1}) {
    while (true) {
      int got = ssh_channel_read_nonblocking(channel, buffer.data(), buffer.size(), is_stderr);
      if (got == SSH_ERROR) return false;
      if (got <= 0) break;
      // A caller's stdout that is gone (its reader died) drops the output, as ssh would die of it.
      write_all(is_stderr != 0 ? call.err : call.out, buffer.data(), static_cast<std::size_t>(got));
    }
  }
  return true;
}

// "PROBLEM (libssh's error)": the session failed, and no further command may use it.
RemoteExit session_lost(ssh_session session, const std::string& problem) {
  RemoteExit lost;
  lost.problem = fmt::format("{} ({})", problem, ssh_get_error(session));
  lost.session_lost = true;
  return lost;
}

// The channel opens and the command starts, each within kOpenTimeout; else what stopped them.
std::optional<RemoteExit> start_command(ssh_session session, ssh_channel channel, const RemoteCall& call,
                                        const std::atomic<bool>& stop) {
  Deadline deadline(kOpenTimeout);
  auto wait_step = [&](auto step, const char* what) -> std::optional<RemoteExit> {
    while (true) {
      int rc = step();
      if (rc == SSH_OK) return std::nullopt;
      if (rc != SSH_AGAIN) return session_lost(session, fmt::format("sshd refused to {}", what));
      if (stop.load() || caller_gone(call.caller))
        return RemoteExit{255, "stopped before the command started", false};
      if (deadline.expired())
        return session_lost(session,
                            fmt::format("sshd did not {} in {} s", what, kOpenTimeout.count() / 1000));
      wait_session(session, call.wake);
    }
  };
  if (auto failed = wait_step([&] { return ssh_channel_open_session(channel); }, "open a channel"))
    return failed;
  return wait_step([&] { return ssh_channel_request_exec(channel, call.command.c_str()); },
                   "start the command");
}

// The caller's stdin on its way to the command: read when it is ready and nothing read
// before still waits for the channel's window.
struct StdinRelay {
  bool open = false, watched = false;
  std::string pending;
  std::array<char, 16384> buffer{};
};

// One step of it: read what is ready (its end sends EOF), give the channel what its window
// takes. False if the session failed.
bool pass_stdin(ssh_channel channel, const RemoteCall& call, StdinRelay& in, bool ready) {
  if (ready && in.pending.empty()) {
    ssize_t got = ::read(call.in, in.buffer.data(), in.buffer.size());
    if (got > 0) in.pending.assign(in.buffer.data(), static_cast<std::size_t>(got));
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
      in.open = false;
      ssh_channel_send_eof(channel);
    }
  }
  if (in.pending.empty()) return true;
  int taken = ssh_channel_write(channel, in.pending.data(), static_cast<uint32_t>(in.pending.size()));
  if (taken == SSH_ERROR) return false;
  in.pending.erase(0, static_cast<std::size_t>(std::max(taken, 0)));
  return true;
}

}  // namespace

bool caller_gone(int caller) {
  pollfd check{caller, POLLIN, 0};
  return poll(&check, 1, 0) > 0;
}

RemoteExit run_remote(ssh_session_struct* session, const RemoteCall& call, const std::atomic<bool>& stop) {
  ssh_set_blocking(session, 0);
  std::unique_ptr<ssh_channel_struct, ChannelFree> channel(ssh_channel_new(session));
  if (channel == nullptr) return session_lost(session, "no channel could be made");
  if (auto failed = start_command(session, channel.get(), call, stop)) return *failed;
  // The loop's one wait: an event holding the session (libssh reads and dispatches every
  // packet that comes, which ssh_channel_read_nonblocking() stops doing once the remote side
  // sent EOF: the exit-status and the close after it would wait forever) and the caller's
  // socket and stdin, whose callbacks only raise flags.
  struct Flags {
    bool caller_left = false, stdin_ready = false, woken = false;
  } flags;
  EventLoop loop(session);
  if (!loop.ready()) return session_lost(session, "no event loop");
  loop.watch(call.caller, &flags.caller_left);
  if (call.wake >= 0) loop.watch(call.wake, &flags.woken);  // `stop` is then set: seen at the top
  StdinRelay in;
  in.open = call.in >= 0;
  while (true) {
    bool drained = drain(channel.get(), call);
    bool eof = ssh_channel_is_eof(channel.get()) != 0;
    // The command's end: the channel closed, or its output ended and its exit status came.
    if (ssh_channel_is_closed(channel.get()) != 0 ||
        (eof && drained && ssh_channel_get_exit_status(channel.get()) >= 0)) {
      drain(channel.get(), call);  // what came in the same packets as the close
      break;
    }
    if (!drained) return session_lost(session, "the connection failed");
    if (stop.load()) return RemoteExit{255, "the launcher stopped", false};
    // stdin is watched only while nothing read from it waits for the channel's window.
    bool watch = in.open && in.pending.empty();
    if (watch != in.watched) {
      if (watch) loop.watch(call.in, &flags.stdin_ready);
      if (!watch) loop.unwatch(call.in);
      in.watched = watch;
    }
    flags.stdin_ready = false;
    loop.wait(kChannelPollMs);
    if (flags.caller_left) return RemoteExit{255, "the caller went away", false};
    if (!pass_stdin(channel.get(), call, in, flags.stdin_ready))
      return session_lost(session, "the connection failed");
  }
  if (ssh_is_connected(session) == 0) return session_lost(session, "the connection closed");
  int status = ssh_channel_get_exit_status(channel.get());
  RemoteExit result;
  result.status = status >= 0 && status <= 255 ? status : 255;
  if (status < 0) result.problem = "the command ended with no exit status (a signal?)";
  return result;
}

}  // namespace tmpi::launch

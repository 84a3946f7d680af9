// See ssh/channel.h. libssh in non-blocking mode: every call returns at once (SSH_AGAIN when
// it would wait), and ssh_channel_read_nonblocking() both reads the socket and dispatches
// what came (window adjustments, exit-status, EOF, close), so the loop calls it after every
// poll, whether or not the socket was readable: libssh may hold data it has already read.
//
// The caller's stdout and stderr are written without blocking too (CallerOutput): a relay
// thread blocked in a write to a pipe that nobody drains would hold the launcher's exit, and
// report.json, for good. What the caller has not taken waits here, up to kOutputHeld a
// stream; past that the channel is not read, and its window stops the command, as a full
// pipe stops it under ssh.
#include "ssh/channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <libssh/libssh.h>

#include "common/backoff.h"

namespace tmpi::launch {

namespace {

constexpr int kChannelPollMs = 100;
constexpr Millis kOpenTimeout(30000);            // the channel's open and the exec's answer, together
constexpr std::size_t kOutputHeld = 256 * 1024;  // a stream's output read and not yet taken
constexpr std::size_t kSaidKept = 240;           // of its output, for naming a daemon that failed

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
  void watch(int fd, bool* flag, short events = POLLIN) {
    if (ssh_event_add_fd(event_, fd, events, &raise_flag, flag) == SSH_OK) fds_.push_back(fd);
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

// One of the caller's output descriptors, written only as far as it takes at once. A pipe
// is opened again through /proc with O_NONBLOCK: an open file of its own, so that the flags
// of the one that MPI shares stay as they are (where /proc is missing, a write waits for
// POLLOUT and is at most PIPE_BUF, which a pipe with room takes whole). A socket takes
// MSG_DONTWAIT; a file, /dev/null or a terminal is written as it is. A reader that died
// drops the output, as ssh would die of it.
class CallerOutput {
 public:
  explicit CallerOutput(int fd) : fd_(fd) {
    struct stat status {};
    if (fd < 0 || fstat(fd, &status) != 0) {
      gone_ = true;
    } else if (S_ISSOCK(status.st_mode)) {
      socket_ = true;
    } else if (S_ISFIFO(status.st_mode)) {
      own_ = ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (own_ >= 0) fd_ = own_;
      gone_ = own_ < 0 && errno == ENXIO;  // no reader is left
      guarded_ = own_ < 0;
    }
  }
  CallerOutput(const CallerOutput&) = delete;
  CallerOutput& operator=(const CallerOutput&) = delete;
  ~CallerOutput() {
    if (own_ >= 0) close(own_);
  }

  std::size_t room() const { return gone_ ? kOutputHeld : kOutputHeld - held_.size(); }
  bool waiting() const { return !gone_ && !held_.empty(); }
  int fd() const { return fd_; }
  void add(const char* data, std::size_t size) {
    if (!gone_) held_.append(data, size);
  }
  void flush() {
    while (waiting()) {
      ssize_t written = write_now();
      if (written > 0) {
        held_.erase(0, static_cast<std::size_t>(written));
      } else if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else if (written == 0 || errno != EINTR) {
        gone_ = true;
        held_.clear();
      }
    }
  }

 private:
  ssize_t write_now() {
    if (socket_) return send(fd_, held_.data(), held_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    std::size_t size = held_.size();
    if (guarded_) {
      pollfd writable{fd_, POLLOUT, 0};
      if (poll(&writable, 1, 0) != 1 || (writable.revents & POLLOUT) == 0) {
        errno = (writable.revents & (POLLERR | POLLHUP)) != 0 ? EPIPE : EAGAIN;
        return -1;
      }
      size = std::min<std::size_t>(size, PIPE_BUF);
    }
    return ::write(fd_, held_.data(), size);
  }

  int fd_ = -1;
  int own_ = -1;  // the pipe opened again, closed here
  bool socket_ = false, guarded_ = false, gone_ = false;
  std::string held_;
};

struct CallerOutputs {
  CallerOutput out, err;
  bool waiting() const { return out.waiting() || err.waiting(); }
};

// Moves what the channel holds into the caller's outputs, as far as each has room, and
// writes what each takes now; the first kSaidKept bytes are kept in `said` too. False if the
// session failed.
bool drain(ssh_channel channel, CallerOutputs& outputs, std::string& said) {
  std::array<char, 32768> buffer{};
  for (int is_stderr : {0, 1}) {
    CallerOutput& output = is_stderr != 0 ? outputs.err : outputs.out;
    output.flush();
    while (output.room() > 0) {
      auto wanted = static_cast<uint32_t>(std::min(buffer.size(), output.room()));
      int got = ssh_channel_read_nonblocking(channel, buffer.data(), wanted, is_stderr);
      if (got == SSH_ERROR) return false;
      if (got <= 0) break;
      output.add(buffer.data(), static_cast<std::size_t>(got));
      output.flush();
      said.append(buffer.data(), std::min(static_cast<std::size_t>(got), kSaidKept - said.size()));
    }
  }
  return true;
}

// Keeps `fd` in the loop's wait exactly while `wanted` (`watched`: whether it is now).
void watch_while(EventLoop& loop, int fd, bool wanted, bool& watched, bool* flag, short events) {
  if (wanted == watched) return;
  if (wanted) loop.watch(fd, flag, events);
  if (!wanted) loop.unwatch(fd);
  watched = wanted;
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
        return RemoteExit{255, "stopped before the command started", false, ""};
      if (deadline.expired())
        return session_lost(session,
                            fmt::format("sshd did not {} in {} s", what, kOpenTimeout.count() / 1000));
      wait_session(session, call.wake);
    }
  };
  if (auto failed = wait_step([&] { return ssh_channel_open_session(channel); }, "open a channel"))
    return failed;
  if (call.pty) {
    const PtyRequest& pty = *call.pty;
    auto request = [&] {
      return ssh_channel_request_pty_size(channel, pty.term.c_str(), pty.cols, pty.rows);
    };
    if (auto failed = wait_step(request, "give the session a terminal")) return failed;
  }
  if (call.command.empty())
    return wait_step([&] { return ssh_channel_request_shell(channel); }, "start a shell");
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
  // sent EOF: the exit-status and the close after it would wait forever), the caller's socket,
  // its stdin while the channel's window can take more, and its outputs while output waits
  // for them; their callbacks only raise flags.
  struct Flags {
    bool caller_left = false, stdin_ready = false, output_ready = false, woken = false, resized = false;
  } flags;
  EventLoop loop(session);
  if (!loop.ready()) return session_lost(session, "no event loop");
  if (call.caller >= 0) loop.watch(call.caller, &flags.caller_left);  // none: the client is its own caller
  if (call.wake >= 0) loop.watch(call.wake, &flags.woken);            // `stop` is then set: seen at the top
  if (call.window != nullptr && call.window->read_fd() >= 0)
    loop.watch(call.window->read_fd(), &flags.resized);
  StdinRelay in;
  in.open = call.in >= 0;
  CallerOutputs outputs{CallerOutput(call.out), CallerOutput(call.err)};
  std::array<bool, 3> watched{};  // stdin, stdout, stderr
  bool ended = false;
  std::string said;
  while (true) {
    bool drained = drain(channel.get(), outputs, said);
    // The command's end: the channel closed, or its output ended and its exit status came.
    // The loop goes on until the caller has taken the output.
    if (!ended &&
        (ssh_channel_is_closed(channel.get()) != 0 || (ssh_channel_is_eof(channel.get()) != 0 && drained &&
                                                       ssh_channel_get_exit_status(channel.get()) >= 0))) {
      ended = true;
      drained = drain(channel.get(), outputs, said);  // what came in the same packets as the close
    }
    if (ended && (!outputs.waiting() || !drained)) break;
    if (!drained) return session_lost(session, "the connection failed");
    if (stop.load()) return RemoteExit{255, "the launcher stopped", false, ""};
    watch_while(loop, call.in, !ended && in.open && in.pending.empty(), watched[0], &flags.stdin_ready,
                POLLIN);
    watch_while(loop, outputs.out.fd(), outputs.out.waiting(), watched[1], &flags.output_ready, POLLOUT);
    watch_while(loop, outputs.err.fd(), outputs.err.waiting(), watched[2], &flags.output_ready, POLLOUT);
    flags.stdin_ready = false;
    loop.wait(kChannelPollMs);
    if (flags.caller_left) return RemoteExit{255, "the caller went away", false, ""};
    if (flags.resized && call.window->take()) {  // a window-change wants no reply: it never waits
      PtyRequest size = terminal_size(call.in);
      ssh_channel_change_pty_size(channel.get(), size.cols, size.rows);
    }
    flags.resized = false;
    if (!ended && !pass_stdin(channel.get(), call, in, flags.stdin_ready))
      return session_lost(session, "the connection failed");
  }
  if (ssh_is_connected(session) == 0) return session_lost(session, "the connection closed");
  int status = ssh_channel_get_exit_status(channel.get());
  RemoteExit result;
  result.said = std::move(said);
  result.status = status >= 0 && status <= 255 ? status : 255;
  if (status < 0) result.problem = "the command ended with no exit status (a signal?)";
  return result;
}

}  // namespace tmpi::launch

// See ssh/relay.h. One acceptor thread polls the socket and the wake pipe (written at
// destruction, so that every thread ends at once); each request gets a thread of its own,
// which reads it (5 s at most), waits for its host's verdict, runs the command
// (ssh/channel.h) and answers one line. A host's session serves one command at a time:
// libssh sessions are not for two threads at once.
#include "ssh/relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/fd_passing.h"
#include "common/utf8.h"
#include "ssh/call.h"
#include "ssh/channel.h"

namespace tmpi::launch {

namespace {

constexpr int kRelayPollMs = 100;
constexpr Millis kRequestTimeout(5000);
constexpr std::size_t kMaxCallers = 65536;  // requests at once: MPI asks once per host
// mpirun may ask before the check has reached its host; the check's handshakes end within
// their own 10 s timeout, so this only bounds a check that never reports.
constexpr Millis kVerdictTimeout(60000);

// The relay writes into MPI's pipes; a reader that died must not end the launcher (SIGPIPE).
void block_sigpipe() {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
}

void answer(int caller, const std::string& line) {
  std::string text = line + "\n";
  [[maybe_unused]] ssize_t sent = send(caller, text.data(), text.size(), MSG_NOSIGNAL);
}

// One line for the caller's stderr: no control character, bounded, UTF-8.
std::string one_line(std::string_view text) {
  std::string out = truncate_utf8(valid_utf8(text), 300, "...");
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

struct Request {
  SshCall call;
  std::array<int, 3> fds{-1, -1, -1};
  ~Request() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

// The request and its three descriptors, or nullopt (malformed, too slow, too big).
// `wake` readable: the relay is being destroyed.
std::unique_ptr<Request> read_request(int caller, int wake) {
  auto request = std::make_unique<Request>();
  Deadline deadline(kRequestTimeout);
  std::string bytes;
  std::size_t want = kRelayMagic.size() + 4;
  bool have_fds = false;
  while (bytes.size() < want) {
    std::array<pollfd, 2> readable{{{caller, POLLIN, 0}, {wake, POLLIN, 0}}};
    if (deadline.expired() || poll(readable.data(), readable.size(), kRelayPollMs) < 0) return nullptr;
    if (readable[1].revents != 0) return nullptr;
    if (readable[0].revents == 0) continue;
    std::array<char, 65536> buffer{};
    Received got = receive_with_fds(caller, buffer.data(), std::min(buffer.size(), want - bytes.size()), 0);
    // Exactly the three of the first message are the caller's stdin, stdout and stderr; any other
    // descriptor is closed at once, as is every one of a message the kernel cut.
    if (!have_fds && got.fds.size() == 3 && !got.truncated) {
      std::copy(got.fds.begin(), got.fds.end(), request->fds.begin());
      have_fds = true;
    } else {
      for (int other : got.fds) close(other);
    }
    if (got.bytes <= 0 || got.truncated) return nullptr;
    bytes.append(buffer.data(), static_cast<std::size_t>(got.bytes));
    if (bytes.size() == kRelayMagic.size() + 4 && want == bytes.size()) {
      if (bytes.compare(0, kRelayMagic.size(), kRelayMagic) != 0) return nullptr;
      std::uint32_t size = 0;
      for (int i = 0; i < 4; ++i)
        size |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[kRelayMagic.size() + i]))
                << (8 * i);
      if (size == 0 || size > kRelayMaxRequest) return nullptr;
      want += size;
    }
  }
  auto call = decode_relay_request(std::string_view(bytes).substr(kRelayMagic.size() + 4));
  if (!call || !have_fds) return nullptr;
  request->call = std::move(*call);
  return request;
}

}  // namespace

Expected<std::unique_ptr<SshRelay>> SshRelay::start(const std::vector<std::string>& hosts, int port) {
  TMPI_ASSIGN(auto dir, ScratchDir::make("tmpi-relay"));
  std::string path = dir->path() + "/relay.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path)
    return make_error(Exit::kSoftware, "ssh relay: the socket's path {} is too long; set TMPDIR shorter",
                      path);
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 256) != 0) {
    int error = errno;
    if (listener >= 0) close(listener);
    return make_error(Exit::kSoftware, "ssh relay: cannot listen on {}: {}", path, std::strerror(error));
  }
  std::array<int, 2> wake{-1, -1};
  if (pipe2(wake.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
    int error = errno;
    close(listener);
    return make_error(Exit::kOsErr, "ssh relay: no pipe: {}", std::strerror(error));
  }
  std::unique_ptr<SshRelay> relay(new SshRelay(std::move(dir), listener, wake, port, hosts));
  try {  // started here, so that a refused thread (the process limit) is an error, its fds closed
    relay->acceptor_ = std::jthread([raw = relay.get()] { raw->accept_loop(); });
  } catch (const std::system_error& e) {
    return make_error(Exit::kOsErr, "ssh relay: no thread to accept on: {}", e.what());
  }
  return relay;
}

SshRelay::SshRelay(std::shared_ptr<ScratchDir> dir, int listener, std::array<int, 2> wake, int port,
                   const std::vector<std::string>& hosts)
    : dir_(std::move(dir)),
      path_(dir_->path() + "/relay.sock"),
      listener_(listener),
      wake_(wake),
      port_(port) {
  for (const auto& host : hosts) {
    slots_[host].host = host;
    std::string short_name = host.substr(0, host.find('.'));
    auto [it, added] = short_names_.emplace(short_name, host);
    if (!added && it->second != host) it->second.clear();  // two hosts share it: ambiguous
  }
}

SshRelay::~SshRelay() {
  {
    std::lock_guard lock(mutex_);  // a waiter between its test of stop_ and its wait is not missed
    stop_ = true;
  }
  changed_.notify_all();
  [[maybe_unused]] ssize_t woken = write(wake_[1], "x", 1);  // every poll below returns now
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<Caller> callers;
  {
    std::lock_guard lock(mutex_);
    callers.swap(callers_);
  }
  callers.clear();  // each ends as soon as it sees stop_, woken by the pipe or by changed_
  close(listener_);
  close(wake_[0]);
  close(wake_[1]);
  Counts done = counts();
  // One line a job, so that a person who sees no ssh process in the pod knows why.
  if (done.relayed + done.fell_back + done.failed > 0)
    spdlog::info("ssh relay: {} command(s) ran over the check's connections, {} went to ssh, {} failed",
                 done.relayed, done.fell_back, done.failed);
}

void SshRelay::offer(const std::string& host, SshSessionPtr session) {
  std::lock_guard lock(mutex_);
  auto slot = slots_.find(host);
  // Not ours, or a second verdict on a host already served: the session closes here.
  if (slot == slots_.end() || slot->second.state == Slot::State::kReady) return;
  slot->second.session = std::move(session);
  slot->second.state = Slot::State::kReady;
  changed_.notify_all();
}

void SshRelay::refuse(const std::string& host, const std::string& problem) {
  std::lock_guard lock(mutex_);
  auto slot = slots_.find(host);
  if (slot == slots_.end()) return;
  slot->second.state = Slot::State::kRefused;
  slot->second.problem = problem;
  changed_.notify_all();
}

bool SshRelay::wait_idle(Millis budget) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, budget, [this] {
    return std::none_of(slots_.begin(), slots_.end(), [](const auto& slot) { return slot.second.busy; });
  });
}

SshRelay::Counts SshRelay::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::vector<SshRelay::FailedStart> SshRelay::failed_starts() const {
  std::lock_guard lock(mutex_);
  std::vector<FailedStart> out;
  for (const auto& [host, slot] : slots_) {
    if (slot.failed) out.push_back(*slot.failed);
  }
  return out;
}

SshRelay::Slot* SshRelay::find_slot(const std::string& host) {
  if (auto exact = slots_.find(host); exact != slots_.end()) return &exact->second;
  // Open MPI names a node as its hostfile does, or shortened (orte_keep_fqdn_hostnames).
  auto named = short_names_.find(host);
  if (named == short_names_.end() || named->second.empty()) return nullptr;
  return &slots_.at(named->second);
}

void SshRelay::accept_loop() {
  while (!stop_) {
    std::array<pollfd, 2> readable{{{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}}};
    if (poll(readable.data(), readable.size(), kRelayPollMs) <= 0 || readable[0].revents == 0) continue;
    int caller = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (caller < 0) continue;
    ucred peer{};
    socklen_t size = sizeof peer;
    if (getsockopt(caller, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != getuid()) {
      close(caller);
      continue;
    }
    std::lock_guard lock(mutex_);
    std::erase_if(callers_, [](const Caller& ended) { return ended.done->load(); });
    if (callers_.size() >= kMaxCallers) {  // a flood of requests (MPI asks once a host): ssh serves the rest
      answer(caller, "fallback");
      close(caller);
      continue;
    }
    try {
      auto done = std::make_shared<std::atomic<bool>>(false);
      callers_.push_back({std::jthread([this, caller, done] {
                            serve(caller);
                            done->store(true);  // its last step: joining it then waits for nothing
                          }),
                          done});
    } catch (const std::system_error& e) {  // no thread to be had: that daemon's ssh is the real one
      answer(caller, "fallback");
      close(caller);
    }
  }
}

void SshRelay::serve(int caller) {
  block_sigpipe();
  std::unique_ptr<Request> request = read_request(caller, wake_[0]);
  auto finish = [&](const std::string& line, int Counts::*counter) {
    {
      std::lock_guard lock(mutex_);  // counted first: a caller that has its answer sees it counted
      ++(counts_.*counter);
    }
    answer(caller, line);
    close(caller);
  };
  if (!request && stop_) {  // cut short by the relay's end: not the caller's fault, and not counted
    answer(caller, "fail the launcher is stopping");
    close(caller);
    return;
  }
  if (!request) return finish("fail the request to the launcher's ssh relay was malformed", &Counts::failed);
  const SshCall& call = request->call;
  Slot* slot = nullptr;
  {
    std::unique_lock lock(mutex_);
    slot = find_slot(call.host);
    bool other_login =
        (call.port && *call.port != port_) || (!call.user.empty() && call.user != ssh_login_user());
    if (slot == nullptr || other_login) {
      lock.unlock();
      return finish("fallback", &Counts::fell_back);
    }
    Deadline deadline(kVerdictTimeout);
    while (slot->state == Slot::State::kPending && !stop_ && !deadline.expired()) {
      changed_.wait_for(lock, Millis(kRelayPollMs));
      if (caller_gone(caller)) {  // its ssh was killed while it waited
        lock.unlock();
        close(caller);
        return;
      }
    }
    if (slot->state != Slot::State::kReady || slot->busy) {
      std::string line = slot->state == Slot::State::kRefused
                             ? "fail the preflight's ssh check failed: " + one_line(slot->problem)
                         : slot->busy ? "fallback"
                                      : "fail the launcher's ssh check gave no verdict on this host";
      lock.unlock();
      return finish(line, line == "fallback" ? &Counts::fell_back : &Counts::failed);
    }
    slot->busy = true;
  }
  RemoteCall remote;
  remote.command = call.command;
  remote.in = request->fds[0];
  remote.out = request->fds[1];
  remote.err = request->fds[2];
  remote.caller = caller;
  remote.wake = wake_[0];
  RemoteExit ended = run_remote(slot->session.get(), remote, stop_);
  {
    std::lock_guard lock(mutex_);
    slot->busy = false;
    if (ended.session_lost) {
      slot->state = Slot::State::kRefused;
      slot->problem = ended.problem;
    }
    if (!ended.session_lost && ended.problem.empty() && ended.status != 0 && !slot->failed)
      slot->failed = FailedStart{slot->host, ended.status, std::move(ended.said), Clock::now()};
    changed_.notify_all();  // wait_idle
  }
  if (!ended.problem.empty()) spdlog::debug("ssh relay: {}: {}", call.host, ended.problem);
  if (ended.session_lost) return finish("fail " + one_line(ended.problem), &Counts::failed);
  finish("exit " + std::to_string(ended.status), &Counts::relayed);
}

}  // namespace tmpi::launch

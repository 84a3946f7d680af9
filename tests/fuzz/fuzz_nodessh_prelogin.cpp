// libFuzzer target: mpi-sshd's own connection code (nodessh/connections.cpp, start_session;
// nodessh/connection_process.cpp, serve_turn) against what a stranger with no key can send
// before login: the input is the byte stream of the client's side of one TCP connection
// (its banner and lines before it, RFC 4253 section 4.2; binary packets of any length and
// padding, section 6; KEXINIT with any name-lists, section 7.1; KEX, service and userauth
// messages before the keys are set; random bytes). The seeds (corpus/nodessh_prelogin) are
// OpenSSH 9.2's own banner and KEXINIT, as its client sent them, and packets made by hand
// to those sections: lengths 0 and 0xFFFFFFF0, padding beyond the packet, floods.
//
// The server is set up once as mpi-sshd sets itself up (server.cpp, configure_bind: the job
// key, made here in memory as an Ed25519 key, as the host key and the only authorized key;
// the algorithms it offers). Each input gets a socketpair: the server's end goes through
// start_session as an accepted socket would; the input goes into the client's end in chunks,
// each followed by one turn of the connection process's loop (a poll that does not wait, then
// serve_turn), so that libssh also meets packets split across reads; then the client's write
// side is shut and the loop runs until the connection is over. A connection still open after
// kMaxTurns is given a clock past its login grace, so that its own deadline closes it: no
// input sleeps, and everything is freed by the code that frees it in the server.
//
// Beside "no crash, no sanitizer report", it checks after every turn what must hold for a
// client without the job key:
// - the login gate never says authenticated, and the listener is never told of a login
//   (only the banner and refusals, one line each, on the report pipe);
// - no channel is ever opened, no command started (no pid in by_pid, no orphan), no process
//   forked (no fork() at all, no new child of this thread);
// - the connection ends as one that did not log in, and its socket is closed with it.
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "nodessh/server_state.h"

namespace {

using namespace tmpi::nodessh;  // NOLINT(google-build-using-namespace): a fuzzer's own file

void check(bool holds) {
  if (!holds) std::abort();
}

constexpr std::size_t kChunk = 256;  // bytes written between two turns of the loop
constexpr int kMaxTurns = 64;        // after the input's end; each one a poll that does not wait

// The server as a connection process inherits it from the listener: the bind with the job
// key, the job's public key, the options. Made once; what one connection adds is freed with it.
Server::State& server() {
  static Server::State* state = [] {
    auto* made = new Server::State();  // kept to the end: libFuzzer exits without unwinding
    ssh_key key = nullptr;
    check(ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) == SSH_OK);
    char* text = nullptr;
    check(ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &text) == SSH_OK);
    ssh_key_free(key);
    // configure_bind reads the key as mpi-sshd does, from an ssh folder: one made for it.
    std::string dir = (std::filesystem::temp_directory_path() / "fuzz_nodessh_prelogin.XXXXXX").string();
    check(mkdtemp(dir.data()) != nullptr);
    const std::string path = dir + "/id_ed25519";
    {
      std::ofstream out(path);
      out << text;
    }
    ssh_string_free_char(text);
    chmod(path.c_str(), 0600);
    made->options.ssh_dir = dir;
    check(configure_bind(*made).ok());
    std::filesystem::remove_all(dir);
    return made;
  }();
  return *state;
}

// libssh is Debian's, built without coverage: libFuzzer sees none of its branches. Two signs
// of how far into it an input got stand in, as features of their own (libFuzzer's extra
// counters, reset before each input): what the server wrote back (its KEXINIT, the key
// exchange's reply, NEWKEYS, its extensions), and each kind of refusal it reported (libssh's
// error, without what it quotes), so that an input reaching a new step or a new error is kept.
constexpr std::size_t kWrittenFeatures = 256;
constexpr std::size_t kRefusalFeatures = 768;
__attribute__((section("__libfuzzer_extra_counters")))
std::uint8_t libssh_features[kWrittenFeatures + kRefusalFeatures];

// A refusal's kind: libssh's error up to what it quotes from the client ("(banner: ...)",
// "client [...]", "too high(...)", "DISCONNECT: 2:...") and at most 60 bytes of it, numbers
// left out, since each quote would make every input new; a packet's type is kept ("(type 5)"),
// since each type takes its own path.
void note_refusal(const std::string& line) {
  const std::size_t error = line.find("failed: ");
  std::string kind = line.substr(0, error == std::string::npos ? 60 : error + 68);
  const std::size_t quote = std::min(kind.find_first_of("(["), kind.find(": ", kind.find("DISCONNECT")));
  const bool typed = quote < kind.size() && kind.compare(quote, 6, "(type ") == 0;
  kind.erase(std::min(typed ? kind.find(')', quote) : quote, kind.size()));
  std::size_t hash = 0;
  for (char c : kind) {
    if (typed || c < '0' || c > '9') hash = hash * 31 + static_cast<unsigned char>(c);
  }
  libssh_features[kWrittenFeatures + hash % kRefusalFeatures] = 1;
}

// Reads what the server wrote, so that its socket never fills; returns how many bytes.
std::size_t drain(int fd) {
  char sink[4096];
  std::size_t total = 0;
  ssize_t got = 0;
  while ((got = read(fd, sink, sizeof sink)) > 0) total += static_cast<std::size_t>(got);
  return total;
}

// What the connection process told the listener: a banner's arrival or refusals, never a login.
void check_reports(int fd, std::string& pending) {
  char buffer[4096];
  ssize_t got = 0;
  while ((got = read(fd, buffer, sizeof buffer)) > 0) pending.append(buffer, static_cast<std::size_t>(got));
  std::size_t end = 0;
  while ((end = pending.find('\n')) != std::string::npos) {
    check(end > 0 && (pending[0] == kReportBanner || pending[0] == kReportRefusal));
    check(pending[0] != kReportRefusal || pending.find('\t') < end);
    if (pending[0] == kReportRefusal) note_refusal(pending.substr(0, end));
    pending.erase(0, end + 1);
  }
}

// Every fork() through libc, as a command's start would make (nodessh/command.cpp). Not the
// sanitizers' own llvm-symbolizer, which they start with a raw syscall while libFuzzer prints
// a new function: a child of this process is not in itself a sign of a command.
std::atomic<int> forks{0};

// This thread's children now, for a before-and-after: any way of starting a process shows here.
std::string children() {
  std::ifstream in("/proc/thread-self/children");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void check_not_logged_in(const Server::State& state) {
  if (state.connection) {
    check(!state.connection->gate.authenticated() && !state.connection->login_told);
    check(state.connection->channels.empty());
  }
  check(state.by_pid.empty() && state.orphans.empty());
  check(forks == 0);
}

// The peer as the listener would have accepted it, for the log and SSH_CLIENT.
sockaddr_storage stranger() {
  sockaddr_storage address{};
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(51234);
  in.sin_addr.s_addr = htonl(0x0a000005);  // 10.0.0.5
  std::memcpy(&address, &in, sizeof in);
  return address;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);  // a stranger's refusals: millions of lines
  pthread_atfork([] { ++forks; }, nullptr, nullptr);
  server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Server::State& state = server();
  const std::string children_before = children();
  int ends[2];
  int reports[2];
  check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
  check(pipe2(reports, O_NONBLOCK | O_CLOEXEC) == 0);
  const int client = ends[0];
  const int server_end = ends[1];
  state.report_fd = reports[1];
  state.refusals = tmpi::rdv::RefusalLog();
  state.event = ssh_event_new();
  check(state.event != nullptr);

  const auto accepted_at = tmpi::Clock::now();
  auto now = accepted_at;
  Ending ending = Ending::kLoggedIn;  // serve_turn says how it ended
  std::string reported;               // a line of the report pipe read in part
  std::size_t written = 0;
  const bool started = start_session(state, server_end, stranger(), "10.0.0.5:51234", accepted_at);
  bool open = started;
  auto turn = [&] {
    ssh_event_dopoll(state.event, 0);
    written += drain(client);  // what the server wrote: its banner, KEXINIT, replies
    libssh_features[std::min(written / 16, kWrittenFeatures - 1)] = 1;
    open = serve_turn(state, accepted_at, now, ending);
    check_reports(reports[0], reported);
    check_not_logged_in(state);
  };
  std::size_t sent = 0;
  while (open && sent < size) {
    ssize_t wrote = send(client, data + sent, std::min(kChunk, size - sent), MSG_NOSIGNAL);
    if (wrote > 0) sent += static_cast<std::size_t>(wrote);
    if (wrote < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;  // the server has closed
    turn();
  }
  shutdown(client, SHUT_WR);
  for (int turns = 0; open && turns < kMaxTurns; ++turns) turn();
  if (open) {  // still waiting for more: its login grace ends it
    now = accepted_at + state.options.login_grace + tmpi::Millis(1);
    turn();
  }
  check(!open && !state.connection);
  // start_session closes the socket when it fails; else ssh_free does, with the session.
  check(fcntl(server_end, F_GETFD) == -1 && errno == EBADF);
  check(!started || (ending != Ending::kLoggedIn && ending != Ending::kCrashed));
  check(reported.empty());
  check(children() == children_before);

  ssh_event_free(state.event);
  state.event = nullptr;
  state.report_fd = -1;
  close(reports[0]);
  close(reports[1]);
  close(client);
  return 0;
}

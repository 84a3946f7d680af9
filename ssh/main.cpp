// mpi-ssh: the ssh that MPI runs to start its daemons, in a launch with the ssh check beside
// it. It asks the launcher's relay (ssh/relay.h; the socket named by TMPI_SSH_RELAY) to run
// the command over the check's connection to that host, hands the relay its stdin, stdout
// and stderr, and exits with the remote command's status, as ssh would. Where the relay
// cannot serve it (no relay, an option it does not honour, a host it does not hold), it
// becomes the real ssh with the same arguments, so that the worst case is today's launch;
// or, where the running uid has no passwd entry or the image has no ssh, mpi-ssh-client.
//
// MPI starts one of these per host and may kill it (SIGTERM) when it tears the job down:
// the relay sees its socket close and closes the channel, as sshd sees a killed ssh's
// connection close. Small on purpose: libc and the request's format (ssh/call.h), nothing
// else, since it starts once per daemon.
#include <fcntl.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/contract.h"
#include "common/asan_options.h"  // a sanitized mpi-ssh under a pod's LD_PRELOAD
#include "common/fd_passing.h"
#include "common/self_path.h"
#include "ssh/call.h"

namespace {

using tmpi::launch::SshCall;

// The libssh client installed beside this program (ssh/client.h) runs the call where
// OpenSSH's client cannot: passwd has no entry for this uid (ssh would exit "No user exists
// for uid N" before connecting: an arbitrary uid with no nss_wrapper), or the image has no
// ssh at all (the image contract asks for none: docs/design.md, "The runtimes").
void become_client(char** argv) {
  std::string client = tmpi::self_path();
  if (client.empty()) return;
  client = client.substr(0, client.rfind('/') + 1) + "mpi-ssh-client";
  argv[0] = const_cast<char*>("mpi-ssh-client");
  execv(client.c_str(), argv);  // returns only if it could not start
}

[[noreturn]] void become_ssh(char** argv) {
  if (getpwuid(getuid()) == nullptr) become_client(argv);
  argv[0] = const_cast<char*>("ssh");
  execvp("ssh", argv);
  int ssh_errno = errno;
  if (ssh_errno == ENOENT) become_client(argv);
  std::fprintf(stderr, "mpi-ssh: cannot run ssh: %s\n", std::strerror(ssh_errno));
  std::exit(255);
}

int connect_relay(const char* path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (std::strlen(path) >= sizeof address.sun_path) return -1;
  std::strncpy(address.sun_path, path, sizeof address.sun_path - 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The request, its first bytes carrying the three descriptors; false if the relay is gone.
bool send_request(int fd, const std::string& request, const int (&fds)[3]) {
  ssize_t sent = tmpi::send_with_fds(fd, request.data(), request.size(), fds, MSG_NOSIGNAL);
  if (sent <= 0) return false;
  for (auto done = static_cast<std::size_t>(sent); done < request.size();) {
    ssize_t more = send(fd, request.data() + done, request.size() - done, MSG_NOSIGNAL);
    if (more <= 0 && errno != EINTR) return false;
    if (more > 0) done += static_cast<std::size_t>(more);
  }
  return true;
}

// The relay's one line, or "" if it closed first.
std::string read_answer(int fd) {
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    ssize_t got = read(fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || c == '\n') break;
    line += c;
  }
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") {  // ssh's own is -V, which this passes on
    std::printf("mpi-ssh %s\n", TMPI_VERSION);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--help") {
    std::printf(
        "mpi-ssh [ssh options] HOST COMMAND...   (run by MPI as its ssh)\n"
        "Runs COMMAND on HOST over the connection that mpi-launcher's ssh check made, when the\n"
        "launch names its relay in %s; otherwise, or for what the relay cannot serve, it is\n"
        "ssh with the same arguments.\n",
        tmpi::contract::kSshRelay.data());
    return 0;
  }
  SshCall call = tmpi::launch::parse_ssh_call(args);
  const char* path = std::getenv(tmpi::contract::kSshRelay.data());
  if (path == nullptr || *path == '\0' || !tmpi::launch::relay_refusal(call).empty()) become_ssh(argv);
  int relay = connect_relay(path);
  if (relay < 0) become_ssh(argv);
  std::string body = tmpi::launch::encode_relay_request(call);
  std::string request(tmpi::launch::kRelayMagic);
  auto size = static_cast<std::uint32_t>(body.size());
  for (int shift = 0; shift < 32; shift += 8) request += static_cast<char>((size >> shift) & 0xff);
  request += body;
  // A descriptor MPI left closed goes as /dev/null, as ssh would read and write it.
  int fds[3];
  for (int i = 0; i < 3; ++i) {
    bool closed = fcntl(i, F_GETFD) < 0 || (i == 0 && call.no_stdin);
    fds[i] = closed ? open("/dev/null", O_RDWR | O_CLOEXEC) : i;
  }
  if (!send_request(relay, request, fds)) become_ssh(argv);
  std::string answer = read_answer(relay);
  if (answer == "fallback") become_ssh(argv);
  if (answer.rfind("exit ", 0) == 0) return std::atoi(answer.c_str() + 5) & 0xff;
  if (answer.rfind("fail ", 0) == 0) {
    std::fprintf(stderr, "mpi-ssh: %s: %s\n", call.host.c_str(), answer.c_str() + 5);
    return 255;
  }
  std::fprintf(stderr, "mpi-ssh: %s: the launcher's ssh relay ended before the command did\n",
               call.host.c_str());
  return 255;
}

// See ssh_probe.h. Every failure becomes a short reason a person can act on; the rendezvous
// shows it next to the host's name.
#include "common/ssh_probe.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include <libssh/libssh.h>

#include "common/host_key.h"
#include "common/utf8.h"

namespace tmpi {

namespace {

struct KeyDeleter {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
using KeyPtr = std::unique_ptr<std::remove_pointer_t<ssh_key>, KeyDeleter>;

// The user sshd is asked for, looked up once per process. The preflight probes many hosts
// at once, one thread each, and no passwd lookup may run on two threads together:
// nss_wrapper (which the non-root pods preload) keeps one cache that each lookup, getpwuid_r
// too, may reload, and two at once corrupted the heap (malloc aborts in
// cluster.examples.mpi-hello, one run in three). A function-local static is initialised by
// exactly one thread; the others wait for it.
const std::string& running_user() {
  static const std::string user = [] {
    passwd record{};
    passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (getpwuid_r(getuid(), &record, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
        found->pw_name != nullptr && *found->pw_name != '\0') {
      return std::string(found->pw_name);
    }
    const char* name = std::getenv("USER");  // no passwd entry (an arbitrary uid): the shell's word
    return std::string(name != nullptr && *name != '\0' ? name : "root");
  }();
  return user;
}

// A shell's message, for a reason on one line: newlines become spaces, the ends trimmed, cut.
std::string one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  auto first = text.find_first_not_of(' '), last = text.find_last_not_of(' ');
  return first == std::string::npos ? "" : truncate_utf8(text.substr(first, last - first + 1), 120, "...");
}

struct ChannelClose {
  void operator()(ssh_channel channel) const {
    ssh_channel_close(channel);
    ssh_channel_free(channel);
  }
};
using ChannelPtr = std::unique_ptr<std::remove_pointer_t<ssh_channel>, ChannelClose>;

// Authenticating is not running: sshd runs every command through the account's shell, and
// an image's nologin (uid 65534's) prints "This account is currently not available" and
// exits 1, so MPI's daemons never start. So the check runs `exec true` on a channel, as
// MPI's ssh would run its daemon, and wants exit status 0 within the timeout.
std::optional<std::string> command_problem(ssh_session session, const std::string& user, Millis timeout) {
  ChannelPtr channel(ssh_channel_new(session));
  if (channel == nullptr || ssh_channel_open_session(channel.get()) != SSH_OK)
    return fmt::format("sshd opened no session channel for user {} ({})", user, ssh_get_error(session));
  if (ssh_channel_request_exec(channel.get(), "exec true") != SSH_OK)
    return fmt::format("sshd ran no command for user {} ({})", user, ssh_get_error(session));
  std::string said;  // what the account's shell printed instead (nologin's message)
  char buffer[256];
  auto deadline = Clock::now() + timeout;
  while (ssh_channel_is_eof(channel.get()) == 0 && Clock::now() < deadline) {
    for (int is_stderr : {0, 1}) {
      int n = ssh_channel_read_timeout(channel.get(), buffer, sizeof buffer, is_stderr, 100);
      if (n == SSH_ERROR) return fmt::format("sshd dropped the command's channel for user {}", user);
      if (n > 0 && said.size() < 200) said.append(buffer, static_cast<std::size_t>(std::min(n, 200)));
    }
  }
  ssh_channel_send_eof(channel.get());
  int status = ssh_channel_get_exit_status(channel.get());  // waits for the status, or -1
  if (status == 0) return std::nullopt;
  return fmt::format("sshd accepts the job key but runs no command as user {}: `exec true` exited {}{}", user,
                     status, said.empty() ? "" : fmt::format(" ({})", one_line(said)));
}

}  // namespace

const std::string& ssh_login_user() {
  return running_user();
}

void SshSessionClose::operator()(ssh_session_struct* session) const {
  ssh_disconnect(session);
  ssh_free(session);
}

SshVerdict probe_ssh(const SshTarget& target, const std::string& private_key, SshSessionPtr* keep) {
  ssh_key raw = nullptr;
  if (ssh_pki_import_privkey_base64(private_key.c_str(), nullptr, nullptr, nullptr, &raw) != SSH_OK) {
    return {false, "the job key cannot be read"};
  }
  KeyPtr key(raw);
  // Every server of the job presents the host key derived from the job key (host_key.h).
  HostKey host = derive_host_key(private_key);
  std::string host_base64 = host.public_line.substr(host.public_line.find(' ') + 1);
  host_base64.resize(host_base64.find(' '));
  ssh_key raw_host = nullptr;
  if (ssh_pki_import_pubkey_base64(host_base64.c_str(), SSH_KEYTYPE_ED25519, &raw_host) != SSH_OK)
    return {false, "libssh cannot read the host key derived from the job key"};
  KeyPtr host_public(raw_host);

  SshSessionPtr session(ssh_new());
  if (session == nullptr) return {false, "libssh could not make a session (out of memory?)"};
  std::string user = target.user.empty() ? running_user() : target.user;
  long timeout_s = std::max<long>(1, static_cast<long>(target.timeout.count() / 1000));
  auto port = static_cast<unsigned int>(target.port);
  ssh_options_set(session.get(), SSH_OPTIONS_HOST, target.host.c_str());
  ssh_options_set(session.get(), SSH_OPTIONS_PORT, &port);
  ssh_options_set(session.get(), SSH_OPTIONS_USER, user.c_str());
  ssh_options_set(session.get(), SSH_OPTIONS_TIMEOUT, &timeout_s);
  ssh_options_set(session.get(), SSH_OPTIONS_KEY_EXCHANGE,
                  "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256");
  // Every path libssh would otherwise find from the home folder is given, so that it never
  // looks the user up itself (the same passwd race as above, inside libssh).
  ssh_options_set(session.get(), SSH_OPTIONS_SSH_DIR, "/dev/null");
  ssh_options_set(session.get(), SSH_OPTIONS_KNOWNHOSTS, "/dev/null");
  ssh_options_set(session.get(), SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  int no_config = 0;
  ssh_options_set(session.get(), SSH_OPTIONS_PROCESS_CONFIG, &no_config);
  if (ssh_connect(session.get()) != SSH_OK) {
    return {false,
            fmt::format("no sshd on {}:{} ({})", target.host, target.port, ssh_get_error(session.get()))};
  }
  ssh_key raw_server = nullptr;
  if (ssh_get_server_publickey(session.get(), &raw_server) != SSH_OK) return {false, "sshd sent no host key"};
  KeyPtr server_key(raw_server);
  if (ssh_key_cmp(server_key.get(), host_public.get(), SSH_KEY_CMP_PUBLIC) != 0) {
    return {false, "sshd presents another host key, not the one derived from the job key"};
  }
  if (ssh_userauth_publickey(session.get(), user.c_str(), key.get()) != SSH_AUTH_SUCCESS) {
    return {false, fmt::format("sshd refused the job key for user {}", user)};
  }
  if (target.run_command) {
    if (auto problem = command_problem(session.get(), user, target.timeout)) return {false, *problem};
  }
  if (keep != nullptr) *keep = std::move(session);
  return {true, ""};
}

}  // namespace tmpi

// See client.h. libssh does the protocol; this file picks its options so that nothing is
// read that the call did not name (no ~/.ssh, no config, no agent), and turns each failure
// into one line that names the host and what to check.
#include "ssh/client.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <libssh/libssh.h>

namespace tmpi::launch {

namespace {

struct KeyFree {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
using KeyPtr = std::unique_ptr<std::remove_pointer_t<ssh_key>, KeyFree>;

// The host key must be the one the file lists for this host and port: anything else is a
// stranger (or a pod the file does not know), and the connection ends before any login.
Status check_host_key(ssh_session session, const SshCall& call) {
  switch (ssh_session_is_known_server(session)) {
    case SSH_KNOWN_HOSTS_OK:
      return ok_status();
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      return make_error(Exit::kUnavailable, "{} presents another host key than {} lists for it", call.host,
                        call.known_hosts_file);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      return make_error(Exit::kUnavailable, "{} lists no host key for {} (port {})", call.known_hosts_file,
                        call.host, call.port.value_or(22));
    default:
      return make_error(Exit::kUnavailable, "the host key of {} could not be checked ({})", call.host,
                        ssh_get_error(session));
  }
}

}  // namespace

std::optional<std::string> client_cannot_serve(const SshCall& call) {
  if (!call.not_relayable.empty()) return call.not_relayable;
  if (call.identity_file.empty()) return "no identity file (-i)";
  if (call.known_hosts_file.empty() || !call.strict_host_keys.value_or(false))
    return "no -o UserKnownHostsFile with -o StrictHostKeyChecking=yes (host keys are checked against a file "
           "only)";
  if (!call.config_file.empty() && call.config_file != "/dev/null")
    return "a config file (-F) other than /dev/null";
  return std::nullopt;
}

Expected<SshSessionPtr> open_client_session(const SshCall& call, Millis timeout) {
  ssh_key raw_key = nullptr;
  if (ssh_pki_import_privkey_file(call.identity_file.c_str(), nullptr, nullptr, nullptr, &raw_key) != SSH_OK)
    return make_error(Exit::kIo, "the identity file {} cannot be read as a private key", call.identity_file);
  KeyPtr key(raw_key);
  SshSessionPtr session(ssh_new());
  if (session == nullptr)
    return make_error(Exit::kSoftware, "libssh could not make a session (out of memory?)");
  std::string user = call.user.empty() ? ssh_login_user() : call.user;
  unsigned int port = static_cast<unsigned int>(call.port.value_or(22));
  long timeout_s = std::max<long>(1, static_cast<long>(timeout.count() / 1000));
  int no_config = 0;
  ssh_options_set(session.get(), SSH_OPTIONS_HOST, call.host.c_str());
  ssh_options_set(session.get(), SSH_OPTIONS_PORT, &port);
  ssh_options_set(session.get(), SSH_OPTIONS_USER, user.c_str());
  ssh_options_set(session.get(), SSH_OPTIONS_TIMEOUT, &timeout_s);
  ssh_options_set(session.get(), SSH_OPTIONS_PROCESS_CONFIG, &no_config);
  // Every path libssh would find from the home folder is given: it never looks the user up.
  ssh_options_set(session.get(), SSH_OPTIONS_SSH_DIR, "/dev/null");
  ssh_options_set(session.get(), SSH_OPTIONS_KNOWNHOSTS, call.known_hosts_file.c_str());
  ssh_options_set(session.get(), SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  ssh_options_set(session.get(), SSH_OPTIONS_KEY_EXCHANGE,
                  "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256");
  if (ssh_connect(session.get()) != SSH_OK) {
    return make_error(Exit::kUnavailable, "no sshd on {}:{} ({})", call.host, port,
                      ssh_get_error(session.get()));
  }
  TMPI_CHECK(check_host_key(session.get(), call));
  if (ssh_userauth_publickey(session.get(), user.c_str(), key.get()) != SSH_AUTH_SUCCESS)
    return make_error(Exit::kUnavailable, "{} refused the key {} for user {}", call.host, call.identity_file,
                      user);
  return session;
}

}  // namespace tmpi::launch

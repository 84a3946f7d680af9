// See server.h. Opening the server: the host key derived from the job key into libssh's bind
// (every connection process inherits it, and the job key's public half, never its private half), the
// listening socket, the signals, and the descriptor limit. The listener's loop is in listener.cpp, each
// connection's in connection_process.cpp.
#include "nodessh/server.h"

#include <sodium.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include "common/host_key.h"
#include "common/job_key.h"
#include "nodessh/server_state.h"

namespace tmpi::nodessh {

namespace {

// Only the algorithms that ssh-audit finds no fault with, and that every client of the job
// speaks (OpenSSH 9, libssh 0.10 in the launcher).
constexpr const char* kKeyExchange = "curve25519-sha256,curve25519-sha256@libssh.org";
constexpr const char* kCiphers =
    "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,aes256-ctr,aes192-ctr,"
    "aes128-ctr";
constexpr const char* kMacs = "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com";

// The job key's text, wiped when the listener has derived what it needs from it.
struct WipedKeyFile {
  KeyFile file;
  ~WipedKeyFile() { sodium_memzero(file.text.data(), file.text.size()); }
};

// From the job key, the listener keeps its public half (the one key a client logs in with)
// and the host key derived from it (common/host_key.h), and nothing of its private half: the
// connection processes, which parse strangers' bytes, inherit only those two.
Status load_job_key(Server::State& state) {
  WipedKeyFile job;
  TMPI_ASSIGN(job.file, find_job_key(state.options.ssh_dir));
  const std::string& path = job.file.path;
  ssh_key job_private = nullptr;
  if (ssh_pki_import_privkey_base64(job.file.text.c_str(), nullptr, nullptr, nullptr, &job_private) !=
      SSH_OK) {
    return make_error(Exit::kData,
                      "{}: not a private key libssh can read (OpenSSH or PEM, without a passphrase)", path);
  }
  int derived = ssh_pki_export_privkey_to_pubkey(job_private, &state.job_public);
  ssh_key_free(job_private);
  if (derived != SSH_OK) return make_error(Exit::kSoftware, "{}: cannot derive the public key", path);
  HostKey host = derive_host_key(job.file.text);
  ssh_key host_key = nullptr;
  if (ssh_pki_import_privkey_base64(host.private_key.c_str(), nullptr, nullptr, nullptr, &host_key) !=
      SSH_OK) {
    return make_error(Exit::kSoftware, "libssh cannot read the host key derived from {}", path);
  }
  // The bind owns the key from here.
  if (ssh_bind_options_set(state.bind, SSH_BIND_OPTIONS_IMPORT_KEY, host_key) != SSH_OK) {
    ssh_key_free(host_key);
    return make_error(Exit::kSoftware, "libssh cannot serve the host key derived from {}", path);
  }
  return ok_status();
}

}  // namespace

Status configure_bind(Server::State& state) {
  state.bind = ssh_bind_new();
  if (state.bind == nullptr) return make_error(Exit::kSoftware, "libssh could not make its server");
  bool no_config = false;  // no /etc/ssh/libssh_server_config: nothing outside decides
  ssh_bind_options_set(state.bind, SSH_BIND_OPTIONS_PROCESS_CONFIG, &no_config);
  TMPI_CHECK(load_job_key(state));
  const std::pair<ssh_bind_options_e, const char*> algorithms[] = {
      {SSH_BIND_OPTIONS_KEY_EXCHANGE, kKeyExchange},
      {SSH_BIND_OPTIONS_CIPHERS_C_S, kCiphers},
      {SSH_BIND_OPTIONS_CIPHERS_S_C, kCiphers},
      {SSH_BIND_OPTIONS_HMAC_C_S, kMacs},
      {SSH_BIND_OPTIONS_HMAC_S_C, kMacs},
  };
  for (const auto& [option, list] : algorithms) {
    if (ssh_bind_options_set(state.bind, option, list) != SSH_OK) {
      return make_error(Exit::kSoftware, "libssh refused the algorithms {}: {}", list,
                        ssh_get_error(state.bind));
    }
  }
  return ok_status();
}

namespace {

Status watch_signals(Server::State& state) {
  sigset_t set;
  sigemptyset(&set);
  // SIGUSR1 too: blocked here, so that a connection process, which inherits the mask, keeps
  // one sent before its own signalfd exists.
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a peer gone mid-write is an error return, not the end
  state.signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (state.signal_fd < 0) return make_error(Exit::kOsErr, "cannot make a signalfd");
  return ok_status();
}

// The listener holds a report pipe for every connection process, so its soft limit on
// descriptors must cover both bounds of the admission; it is raised up to the hard limit (a
// container's default soft limit is 1024), and a hard limit below the need is named.
void raise_descriptor_limit(Server::State& state) {
  getrlimit(RLIMIT_NOFILE, &state.descriptors_at_start);
  const rlim_t need = static_cast<rlim_t>(state.options.max_connections) +
                      static_cast<rlim_t>(state.options.max_startups) + 64;
  rlimit raised = state.descriptors_at_start;
  if (raised.rlim_cur >= need) return;
  raised.rlim_cur = std::min(need, raised.rlim_max);
  setrlimit(RLIMIT_NOFILE, &raised);
  if (raised.rlim_cur < need) {
    spdlog::warn(
        "the descriptor limit is {} (hard), below the {} that --sshd-max-connections and "
        "--sshd-max-startups need; lower them, or raise the container's nofile limit",
        raised.rlim_max, need);
  }
}

// What every connection process would otherwise make for itself, once each (perf over 100
// logins: about 1.5 ms of its 8): libcrypto's table of algorithm names, which OpenSSL 3 builds
// at a process's first fetch, the fetched algorithms of the key exchange, the ciphers and
// MACs offered, and its random generator. Made in the listener before any fork, they are
// inherited. The generator is not shared by it: OpenSSL 3 reseeds one whose fork id is not
// the process's own before its next output (providers/implementations/rands/drbg.c,
// ossl_prov_drbg_generate).
void warm_libcrypto() {
  unsigned char byte = 0;
  if (RAND_bytes(&byte, 1) != 1) spdlog::warn("libcrypto's random generator did not start in the listener");
  for (const char* name : {"SHA1", "SHA256", "SHA384", "SHA512"})
    EVP_MD_free(EVP_MD_fetch(nullptr, name, nullptr));
  for (const char* name :
       {"AES-128-GCM", "AES-256-GCM", "AES-128-CTR", "AES-192-CTR", "AES-256-CTR", "ChaCha20"})
    EVP_CIPHER_free(EVP_CIPHER_fetch(nullptr, name, nullptr));
  for (const char* name : {"X25519", "ED25519"}) EVP_KEYMGMT_free(EVP_KEYMGMT_fetch(nullptr, name, nullptr));
  EVP_MAC_free(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
}

}  // namespace

Server::State::~State() {
  connection.reset();
  orphans.clear();
  signal_watch.reset();
  for (auto& [pid, child] : children) close(child.report_fd);
  if (event != nullptr) ssh_event_free(event);
  if (bind != nullptr) ssh_bind_free(bind);
  if (job_public != nullptr) ssh_key_free(job_public);
  if (listen_fd >= 0) close(listen_fd);
  if (signal_fd >= 0) close(signal_fd);
}

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}
Server::~Server() = default;

int Server::port() const {
  return state_->port;
}

Expected<std::unique_ptr<Server>> Server::open(const SshdOptions& options) {
  auto state = std::make_unique<State>();
  state->options = options;
  state->admission =
      Admission(AdmissionLimits{options.max_connections, options.max_startups, options.per_source_startups});
  const char* home = std::getenv("HOME");
  state->base_env["HOME"] = home != nullptr && *home != '\0' ? home : "/";
  TMPI_CHECK(configure_bind(*state));
  prepare_login_verifier(*state);
  TMPI_ASSIGN(state->session_filter, SessionFilter::build());
  warm_libcrypto();
  TMPI_ASSIGN(state->listen_fd, listen_on(options));
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  getsockname(state->listen_fd, reinterpret_cast<sockaddr*>(&address), &size);
  state->port = ntohs(address.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(address).sin_port
                                                   : reinterpret_cast<sockaddr_in6&>(address).sin6_port);
  TMPI_CHECK(watch_signals(*state));
  raise_descriptor_limit(*state);
  return std::unique_ptr<Server>(new Server(std::move(state)));
}

}  // namespace tmpi::nodessh

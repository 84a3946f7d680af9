// The job's SSH identity. One key pair per job: its private key is every pod's client
// identity, and its public key every authorized key. Every pod's host key is derived from it
// (common/host_key.h) and pinned in every known_hosts entry, so strict host key checking
// works with no extra secret.
// Keys are read and converted with libssh, and made with libsodium in OpenSSH's own format
// (openssh_key.h); key material never reaches a message.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/topology.h"

namespace tmpi::init {

struct KeyPair {
  std::string private_key;  // as OpenSSH reads it (OpenSSH or PEM form)
  std::string public_line;  // "ssh-ed25519 AAAA... comment"
  std::string file_name;    // OpenSSH's name for the type: id_ed25519, id_ecdsa, id_rsa
};

// Every public line carries this comment, whichever way the key came, so a re-run that
// reuses the key writes the same bytes.
inline constexpr std::string_view kKeyComment = "trainer-mpi";

// A new key, its private half as ssh-keygen writes one (openssh_key.h), read back by libssh.
Expected<KeyPair> generate_ed25519();
// Checks a private key and derives its public half; `origin` names the input in errors.
Expected<KeyPair> key_pair_from_private(std::string private_key, std::string_view origin);
// A mounted Secret: ssh-privatekey (kubernetes.io/ssh-auth, mpi-operator, ours) or id_rsa
// (Trainer, whose key is ECDSA P-521 despite the name).
Expected<KeyPair> key_pair_from_secret_dir(const std::string& dir);
// The identity an earlier run left in ssh_dir, so that re-running changes nothing.
Expected<KeyPair> key_pair_from_ssh_dir(const std::string& ssh_dir);

struct SshLayout {
  std::string ssh_dir;
  int port = 2222;
  std::string home;                                // the home sshd finds for this uid (account.h)
  std::map<std::string, std::string> session_env;  // sshd_config SetEnv (nss_wrapper's variables)
  // Set when sshd's StrictModes would refuse authorized_keys (account.h): why, for the config.
  std::optional<std::string> strict_modes_problem;
  // OpenSSH's sshd serves this pod: it reads authorized_keys and sshd_config, which
  // mpi-sshd does not (it takes the job key alone), so they are written only for sshd.
  bool for_openssh = false;
};

std::string render_known_hosts(const KeyPair& key, const Topology& topology, int port);
std::string render_ssh_config(const KeyPair& key, const SshLayout& layout);
std::string render_sshd_config(const KeyPair& key, const SshLayout& layout);

// Writes the key pair, the host key's public half, the client's config, (for OpenSSH's sshd)
// the host key, authorized_keys and sshd_config, and (with a topology) known_hosts into ssh_dir: owned by the
// running uid, folder 0700, secrets 0600. A non-root uid cannot chmod a folder it does not own (an emptyDir
// mounted as ssh_dir): exit 74, which says to mount it one level up, as HOME. StrictModes is judged once the
// folder exists.
Status install_identity(const KeyPair& key, SshLayout layout, const Topology* topology);

// Whether the running uid can make layout.ssh_dir the 0700 folder ssh needs (a folder that
// another uid owns cannot be), and whether `key` would be the one read back from it (no
// other key there comes first): checked before any output is written, so that a refused
// identity leaves no hostfiles behind either.
Status check_ssh_dir(const SshLayout& layout, const KeyPair& key);

}  // namespace tmpi::init

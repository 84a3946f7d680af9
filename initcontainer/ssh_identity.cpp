// See ssh_identity.h. libssh does the cryptography (parsing of OpenSSH and PEM keys, public
// key derivation), libsodium makes a new key (openssh_key.h); this file only chooses names,
// modes and configs.
#include "initcontainer/ssh_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include <libssh/libssh.h>

#include "common/files.h"
#include "common/host_key.h"
#include "common/job_key.h"
#include "common/openssh_key.h"
#include "common/utf8.h"
#include "initcontainer/account.h"

namespace tmpi::init {

namespace {

struct KeyDeleter {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
using KeyPtr = std::unique_ptr<std::remove_pointer_t<ssh_key>, KeyDeleter>;

std::string take_string(char* text) {
  std::string out = text == nullptr ? "" : text;
  ssh_string_free_char(text);
  return out;
}

std::string file_name_for(enum ssh_keytypes_e type) {
  switch (type) {
    case SSH_KEYTYPE_ED25519:
      return "id_ed25519";
    case SSH_KEYTYPE_RSA:
      return "id_rsa";
    default:
      return "id_ecdsa";
  }
}

Expected<std::string> public_line_of(ssh_key private_key, std::string_view comment) {
  ssh_key raw_public = nullptr;
  if (ssh_pki_export_privkey_to_pubkey(private_key, &raw_public) != SSH_OK) {
    return make_error(Exit::kSoftware, "cannot derive the public key");
  }
  KeyPtr public_key(raw_public);
  char* base64 = nullptr;
  if (ssh_pki_export_pubkey_base64(public_key.get(), &base64) != SSH_OK) {
    return make_error(Exit::kSoftware, "cannot encode the public key");
  }
  const char* type = ssh_key_type(public_key.get()) == SSH_KEYTYPE_ECDSA_P521   ? "ecdsa-sha2-nistp521"
                     : ssh_key_type(public_key.get()) == SSH_KEYTYPE_ECDSA_P384 ? "ecdsa-sha2-nistp384"
                     : ssh_key_type(public_key.get()) == SSH_KEYTYPE_ECDSA_P256
                         ? "ecdsa-sha2-nistp256"
                         : ssh_key_type_to_char(ssh_key_type(public_key.get()));
  return fmt::format("{} {} {}", type, take_string(base64), comment);
}

}  // namespace

Expected<KeyPair> generate_ed25519() {
  // Encoded in OpenSSH's exact format (openssh_key.h), then read back through libssh as any
  // key is: what is written is what every program of the job has parsed.
  TMPI_ASSIGN(std::string private_key, new_openssh_ed25519_private_key(kKeyComment));
  auto pair = key_pair_from_private(std::move(private_key), "the new job key");
  if (!pair) return make_error(Exit::kSoftware, "libssh cannot read the Ed25519 key mpi-init made");
  return pair;
}

Expected<KeyPair> key_pair_from_private(std::string private_key, std::string_view origin) {
  ssh_key raw = nullptr;
  if (ssh_pki_import_privkey_base64(private_key.c_str(), nullptr, nullptr, nullptr, &raw) != SSH_OK) {
    return make_error(Exit::kData,
                      "{}: not a private key libssh can read (OpenSSH or PEM, without "
                      "a passphrase); check the Secret's ssh-privatekey",
                      origin);
  }
  KeyPtr key(raw);
  KeyPair pair;
  pair.file_name = file_name_for(ssh_key_type(key.get()));
  TMPI_ASSIGN(pair.public_line, public_line_of(key.get(), kKeyComment));
  if (private_key.back() != '\n') private_key += '\n';
  pair.private_key = std::move(private_key);
  return pair;
}

Expected<KeyPair> key_pair_from_secret_dir(const std::string& dir) {
  auto file = find_key_file(dir, {"ssh-privatekey", "id_ed25519", "id_ecdsa", "id_rsa"},
                            "the Secret has no ssh-privatekey or id_rsa; mount the job's SSH Secret there "
                            "(type kubernetes.io/ssh-auth)",
                            Exit::kData);
  if (!file) return make_error(file.error().exit, "--ssh-secret {}", file.error().message);
  return key_pair_from_private(std::move(file->text), file->path);
}

Expected<KeyPair> key_pair_from_ssh_dir(const std::string& ssh_dir) {
  TMPI_ASSIGN(KeyFile file, find_job_key(ssh_dir));
  return key_pair_from_private(std::move(file.text), file.path);
}

std::string render_known_hosts(const KeyPair& key, const Topology& topology, int port) {
  // Every pod presents the host key derived from the job key (common/host_key.h), whichever
  // server it runs; pin it for each name ssh may be given.
  std::string key_part = host_key_known_part(derive_host_key(key.private_key));
  std::string out;
  for (const auto& host : topology.all_pods()) {
    std::string names = fmt::format("[{}]:{},[{}]:{}", host.name, port, host.short_name(), port);
    if (!host.address.empty()) names += fmt::format(",[{}]:{}", host.address, port);
    out += fmt::format("{} {}\n", names, key_part);
  }
  return out;
}

std::string render_ssh_config(const KeyPair& key, const SshLayout& layout) {
  return fmt::format(
      "# Written by mpi-init: the job's hosts, with the host key derived from the job key pinned.\n"
      "Host *\n"
      "  Port {0}\n"
      "  IdentityFile {1}/{2}\n"
      "  IdentitiesOnly yes\n"
      "  UserKnownHostsFile {1}/known_hosts\n"
      "  StrictHostKeyChecking yes\n"
      "  BatchMode yes\n"
      "  KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256\n"
      "  ConnectTimeout 10\n"
      "  LogLevel ERROR\n",
      layout.port, layout.ssh_dir, key.file_name);
}

std::string render_sshd_config(const KeyPair& key, const SshLayout& layout) {
  std::string out = fmt::format(
      "# Written by mpi-init: run as `sshd -D -f {0}/sshd_config`, as root or any uid. As non-root,\n"
      "# sshd logs in only the uid it runs as, on a port above 1023, with its files in {0}.\n"
      "Port {1}\n"
      "HostKey {0}/{3}\n"
      "AuthorizedKeysFile {0}/authorized_keys\n"
      "PidFile {0}/sshd.pid\n"
      "PubkeyAuthentication yes\n"
      "PasswordAuthentication no\n"
      "KbdInteractiveAuthentication no\n"
      "PermitRootLogin prohibit-password\n"
      "UsePAM no\n"
      "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256\n"
      // Only the locale, as Debian's own sshd_config: MPI's launchers carry the job's
      // environment on the command line, and a session's LD_PRELOAD or PATH is not a
      // client's to choose.
      "AcceptEnv LANG LC_*\n"
      // A person's scp (SFTP by default since OpenSSH 9.0), sftp and rsync: sshd's own
      // in-process server, which needs no sftp-server binary and no path in the image.
      "Subsystem sftp internal-sftp\n",
      layout.ssh_dir, layout.port, key.file_name, kHostKeyFile);
  if (layout.strict_modes_problem) {
    out += fmt::format(
        "# StrictModes would refuse authorized_keys: {}, and only root may chmod it (a Kubernetes\n"
        "# emptyDir: root-owned, 0777, or 2777 with fsGroup). {} itself is 0700 and this uid's.\n"
        "StrictModes no\n",
        *layout.strict_modes_problem, layout.ssh_dir);
  }
  if (!layout.session_env.empty()) {
    out += "# The sessions (MPI's daemons, the ranks) resolve this uid through nss_wrapper too.\nSetEnv";
    for (const auto& [name, value] : layout.session_env) {
      // A value with a blank is quoted, as sshd_config reads it.
      bool quote = value.find_first_of(" \t") != std::string::npos;
      out += quote ? " \"" : " ";
      out += fmt::format("{}={}", name, value);
      if (quote) out += '"';
    }
    out += "\n";
  }
  return out;
}

Status check_ssh_dir(const SshLayout& layout, const KeyPair& key) {
  const std::string& dir = layout.ssh_dir;
  // The folder is written into ssh's and sshd's configs as a bare word: a blank, a quote or
  // '#' would split or end it, '%' is one of ssh's tokens, and a line break a directive.
  bool plain = !dir.empty() && std::none_of(dir.begin(), dir.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f ||
           std::string_view(" \"'\\#%").find(c) != std::string_view::npos;
  });
  if (!plain) {
    return make_error(
        Exit::kUsage,
        "--ssh-dir {}: ssh's config cannot hold a path with blanks, quotes, '#', '%' or control "
        "characters; choose a plain path (the default is $HOME/.ssh)",
        dump_json(nlohmann::json(truncate_utf8(dir, 200, "..."))));
  }
  // The programs read the first of id_ed25519, id_ecdsa and id_rsa that exists
  // (common/job_key.h). Another key of a type before this job's, left in a folder that
  // outlives pods (a HOME on a volume) by an earlier job or by hand, would be read instead:
  // every ssh and every rendezvous proof would then fail, far from here.
  for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
    if (name == key.file_name) break;
    if (!file_exists(dir + "/" + name)) continue;
    return make_error(Exit::kIo,
                      "--ssh-dir {}: it holds {}, another key than this job's {}, and the job's programs "
                      "would read that one first; remove it, or give the job an ssh folder of its own",
                      dir, name, key.file_name);
  }
  struct stat st {};
  if (getuid() != 0 && stat(dir.c_str(), &st) == 0 && st.st_uid != getuid()) {
    return make_error(
        Exit::kIo,
        "--ssh-dir {}: owned by uid {} (mode {:04o}), and uid {} cannot make it the 0700 folder "
        "ssh needs; mount that volume one level up (as HOME) and let mpi-init create {} "
        "inside it (manifests/base/runtime-openmpi.yaml)",
        dir, st.st_uid, st.st_mode & 07777, getuid(), dir);
  }
  return ok_status();
}

Status install_identity(const KeyPair& key, SshLayout layout, const Topology* topology) {
  const std::string dir = layout.ssh_dir;
  TMPI_CHECK(check_ssh_dir(layout, key));
  TMPI_CHECK(make_dirs(dir, 0700));
  if (layout.for_openssh && !layout.home.empty())
    layout.strict_modes_problem = strict_modes_problem(dir, layout.home, getuid());
  TMPI_CHECK(write_atomic(dir + "/" + key.file_name, key.private_key, {0600}));
  TMPI_CHECK(write_atomic(dir + "/" + key.file_name + ".pub", key.public_line + "\n", {0644}));
  TMPI_CHECK(write_atomic(dir + "/config", render_ssh_config(key, layout), {0644}));
  // The host key's public half for a person who pins it by hand; its private half only where
  // OpenSSH's sshd reads it from a file (mpi-sshd derives it in memory).
  HostKey host = derive_host_key(key.private_key);
  const std::string host_path = dir + "/" + std::string(kHostKeyFile);
  TMPI_CHECK(write_atomic(host_path + ".pub", host.public_line + "\n", {0644}));
  if (layout.for_openssh) {
    TMPI_CHECK(write_atomic(host_path, host.private_key, {0600}));
    TMPI_CHECK(write_atomic(dir + "/authorized_keys", key.public_line + "\n", {0600}));
    TMPI_CHECK(write_atomic(dir + "/sshd_config", render_sshd_config(key, layout), {0644}));
  }
  if (topology != nullptr) {
    TMPI_CHECK(write_atomic(dir + "/known_hosts", render_known_hosts(key, *topology, layout.port), {0644}));
  }
  return ok_status();
}

}  // namespace tmpi::init

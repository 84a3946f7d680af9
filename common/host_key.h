// The job's SSH host key: an Ed25519 key derived from the job key, apart from it. Every
// server of the job (mpi-sshd, and OpenSSH's sshd under manifests/openssh) presents it, and
// every client (OpenSSH's ssh with mpi-init's known_hosts, mpi-ssh-client, the launcher's
// relay, the sidecar's probe) pins it.
//
// Why apart: a server needs its host key's private half in the process that runs the key
// exchange, which is the one that parses a stranger's bytes before login (libssh 0.10 signs
// the exchange inside the session, src/server.c ssh_server_kex / ssh_get_key_params; it has no
// way to ask another process, as OpenSSH's sshd-session asks its monitor). Were the host key
// the job key, whoever took over that process would hold the job key: a login to every pod,
// and the rendezvous's proofs. A derived host key gives them only the host key, which logs in
// nowhere and signs nothing but key exchanges.
//
// Why derived, not made: every pod must present the same key and every client must know it
// with no new Secret and no new file to carry between pods; the job key is what they all hold
// already. The seed is HMAC-SHA256(the private key's text without whitespace, a fixed label),
// as the rendezvous key is (common/proof.h) under its own label: the same job key gives the
// same host key on every pod, its public half reveals nothing of the job key (HMAC is a PRF),
// and the job key cannot be recovered from the host key's private half either.
#pragma once

#include <string>
#include <string_view>

namespace tmpi {

// The file OpenSSH's sshd reads it from, in the ssh folder, when mpi-init writes its config,
// and its public half beside it (.pub) for anyone who pins it by hand.
inline constexpr std::string_view kHostKeyFile = "ssh_host_ed25519_key";
inline constexpr std::string_view kHostKeyComment = "trainer-mpi host key";

struct HostKey {
  std::string private_key;  // armoured OpenSSH private key; wiped on destruction
  std::string public_line;  // "ssh-ed25519 BASE64 trainer-mpi host key"
  HostKey() = default;
  HostKey(HostKey&&) noexcept = default;
  HostKey& operator=(HostKey&&) noexcept = default;
  HostKey(const HostKey&) = delete;
  HostKey& operator=(const HostKey&) = delete;
  ~HostKey();
};

// The host key of the job whose private key (any type, OpenSSH or PEM text) is given. Pure:
// the same text, whitespace aside, gives the same key.
HostKey derive_host_key(std::string_view job_private_key_text);

// "ssh-ed25519 BASE64": the public line without its comment, as known_hosts pins it.
std::string host_key_known_part(const HostKey& key);

}  // namespace tmpi

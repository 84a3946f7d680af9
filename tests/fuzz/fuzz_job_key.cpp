// libFuzzer target: the job's private key as mpi-init reads it from a mounted Secret or an
// ssh folder (outside input: the Secret's ssh-privatekey or id_rsa, an OpenSSH or PEM key,
// read through libssh). Any text gives a key pair or an Error, never a crash or a leak. An
// accepted key must read back as the same key, and known_hosts must pin the host key derived
// from it, never the job key itself (common/host_key.h). (mpi-init writes authorized_keys and
// the public line; it never reads them.)
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/host_key.h"
#include "common/topology.h"
#include "initcontainer/ssh_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto key = tmpi::init::key_pair_from_private(text, "fuzz");
  if (!key) return 0;
  auto again = tmpi::init::key_pair_from_private(key->private_key, "fuzz");
  if (!again || again->public_line != key->public_line || again->file_name != key->file_name) std::abort();
  tmpi::Topology topology;
  topology.hosts.push_back(tmpi::Host{});
  topology.hosts.back().name = "job-node-0-0.job";
  topology.hosts.back().slots = 1;
  std::string known_hosts = tmpi::init::render_known_hosts(*key, topology, 2222);
  std::string job_part = key->public_line.substr(0, key->public_line.rfind(' '));
  if (known_hosts.find(tmpi::host_key_known_part(tmpi::derive_host_key(key->private_key))) ==
      std::string::npos)
    std::abort();
  if (known_hosts.find(job_part) != std::string::npos) std::abort();
  return 0;
}

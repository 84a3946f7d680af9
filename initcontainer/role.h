// mpi-init's choices, as enums (common/choice.h).
// --role: the launcher's pod writes the job's topology and identity; a node's pod only its
// identity.
// --ssh-server: which server the pods run on 2222. mpi-sshd (nodessh/, the default) reads
// the job key alone and needs no passwd entry; OpenSSH's sshd reads the sshd_config that
// mpi-init writes, and, for a uid that /etc/passwd lacks, nss_wrapper's passwd and group.
#pragma once

#include "common/choice.h"
#include "common/topology.h"

namespace tmpi::init {

// The same two roles as hosts.json's (common/topology.h), spelt the same.
using Role = PodRole;
inline constexpr const auto& kRoleSpellings = kPodRoleSpellings;

enum class SshServer { kMpiSshd, kOpenSsh };
inline constexpr Spellings<SshServer, 2> kSshServerSpellings{
    {{"mpi-sshd", SshServer::kMpiSshd}, {"openssh", SshServer::kOpenSsh}}};

}  // namespace tmpi::init

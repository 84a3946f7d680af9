// mpi-init's --role, as an enum (common/choice.h): the launcher's pod writes the job's
// topology and identity; a node's pod only its identity and its sshd's configuration.
#pragma once

#include "common/topology.h"

namespace tmpi::init {

// The same two roles as hosts.json's (common/topology.h), spelt the same.
using Role = PodRole;
inline constexpr const auto& kRoleSpellings = kPodRoleSpellings;

}  // namespace tmpi::init

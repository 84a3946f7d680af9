// mpi-init's --role, as an enum (common/choice.h): the launcher's pod writes the job's
// topology and identity; a node's pod only its identity and its sshd's configuration.
#pragma once

#include "common/choice.h"

namespace tmpi::init {

enum class Role { kLauncher, kNode };
inline constexpr Spellings<Role, 2> kRoleSpellings{{{"launcher", Role::kLauncher}, {"node", Role::kNode}}};

}  // namespace tmpi::init

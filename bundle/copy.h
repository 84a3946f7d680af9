// Putting a bundle in place and checking one: `mpi-bundle copy` (the runtimes' init
// container: from trainer-mpi's image into the pods' volume) and `mpi-bundle verify`.
//
// A copy that was cut short must never run. So every file is copied into DEST/.incoming,
// hashed as it is written and compared with the MANIFEST of the bundle it came from; only
// when all of it matches are the top folders moved into place by rename, bin/ last: until
// then DEST has no bin/, and nothing of the copy can be started. A leftover .incoming (a
// copy killed before) and a previous bundle in DEST are replaced; bin/ goes first.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.h"

namespace tmpi::bundle {

struct CopyStats {
  std::size_t files = 0;
  std::size_t links = 0;
  std::uint64_t bytes = 0;
};

// Copies the bundle at FROM into DEST (made if missing), checked against FROM's MANIFEST.
Expected<CopyStats> copy_bundle(const std::string& from, const std::string& dest);

// Checks the bundle at DIR against its own MANIFEST: every file's size and SHA-256, every
// link's target, and nothing missing.
Expected<CopyStats> verify_bundle(const std::string& dir);

}  // namespace tmpi::bundle

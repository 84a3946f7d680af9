// The bundle's MANIFEST (written by bundle/install.cmake): what a bundle holds, so that a
// copy is checked byte for byte before anything in it runs. Pure: text in, entries or an
// error out, so that unit tests and the fuzzer drive it without files.
//
// One line per entry, sorted, "\n"-terminated:
//   f SHA256 SIZE PATH     a regular file (SHA256: 64 lowercase hex digits; SIZE in bytes)
//   l TARGET PATH          a symbolic link
// Every PATH is relative, under bin/, lib/ or libexec/, made of printable ASCII without
// spaces, with no "." or ".." component; a link's TARGET stays inside the bundle. The text
// is bounded (kMaxEntries, kMaxBytes) and every field checked, since a copy trusts nothing
// that a volume or an image hands it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tmpi::bundle {

inline constexpr std::size_t kMaxEntries = 4096;
inline constexpr std::size_t kMaxManifestBytes = 1U << 20;
inline constexpr std::uint64_t kMaxFileBytes = 1ULL << 30;

struct ManifestEntry {
  enum class Kind { kFile, kLink };
  Kind kind = Kind::kFile;
  std::string path;
  std::string sha256;      // files: lowercase hex
  std::uint64_t size = 0;  // files
  std::string target;      // links
};

// The entries of a MANIFEST's text; `source` names it in errors (a path).
Expected<std::vector<ManifestEntry>> parse_manifest(std::string_view text, std::string_view source);

// The top folders of a bundle, in the order a copy puts them in place: bin/ last, so that
// nothing of a copy can run before all of it is there.
inline constexpr std::string_view kTopFolders[] = {"lib", "libexec", "bin"};

}  // namespace tmpi::bundle

// The bundle's MANIFEST (bundle/manifest.h): `mpi-bundle copy` reads it from an image or a
// volume before it trusts anything there. Any bytes: an entry list or an error, never a
// crash; and what is accepted keeps every path inside the bundle.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bundle/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto entries = tmpi::bundle::parse_manifest(text, "MANIFEST");
  if (entries) {
    for (const auto& entry : *entries) {
      std::string_view path = entry.path;
      bool climbs =
          path == ".." || path.starts_with("../") || path.ends_with("/..") || path.find("/../") != path.npos;
      if (path.empty() || path.front() == '/' || climbs) __builtin_trap();
      if (!entry.target.empty() && entry.target.front() == '/') __builtin_trap();
    }
  }
  return 0;
}

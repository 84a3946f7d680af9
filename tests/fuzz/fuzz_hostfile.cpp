// libFuzzer target: the hostfile parser (outside input: Trainer's or a user's hostfile).
// Any input gives a topology or an Error; an accepted one renders to hostfiles that
// parse back to the same hosts, in both dialects.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/topology.h"
#include "initcontainer/sources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tmpi::init::SourceOptions options;
  options.jobset = "job";
  auto topology = tmpi::init::topology_from_hostfile(text, "fuzz", options);
  if (!topology) return 0;
  for (auto dialect : {tmpi::Dialect::kOpenMpi, tmpi::Dialect::kHydra}) {
    auto again =
        tmpi::init::topology_from_hostfile(tmpi::render_hostfile(*topology, dialect), "fuzz", options);
    if (!again || again->hosts.size() != topology->hosts.size()) std::abort();
    for (std::size_t i = 0; i < again->hosts.size(); ++i) {
      if (again->hosts[i].name != topology->hosts[i].name ||
          again->hosts[i].slots != topology->hosts[i].slots) {
        std::abort();
      }
    }
  }
  return 0;
}

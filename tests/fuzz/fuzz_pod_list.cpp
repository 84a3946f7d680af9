// libFuzzer target: the pod-list parser (outside input: `kubectl get pods -o json`, the
// API). Any input must give a topology or an Error, never a crash, hang or leak; a
// topology it accepts must satisfy the invariants and survive a hosts.json round trip.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/topology.h"
#include "initcontainer/sources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tmpi::init::SourceOptions options;
  options.launcher_as_node = size % 2 == 0;
  auto topology = tmpi::init::topology_from_pod_list(text, "fuzz", options);
  if (!topology) return 0;
  if (!tmpi::validate_topology(*topology, "fuzz")) std::abort();
  auto back = tmpi::parse_hosts_json(tmpi::render_hosts_json(*topology), "fuzz");
  if (!back || tmpi::render_hosts_json(*back) != tmpi::render_hosts_json(*topology)) std::abort();
  return 0;
}

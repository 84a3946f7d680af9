// A fabric check that passed a measured step's deadline, localised from every rank's view.
// After such a deadline each nccl-check rank pings every other one and says, on its own
// line ("nccl-check timeout: {... "silent_ranks": [...]}"), which peers did not answer
// (ncclcheck/main.cpp). One rank's view cannot tell a stopped host from a link that drops:
// its peer is silent either way. Together they can, and every host they name is named from
// its own links or its own silence, never because it happened to notice the deadline:
// - a host none of whose ranks said anything, while another saw it silent: silent (a
//   stopped or lost host); exit 75, which a retry (on another node) may clear;
// - a rank that said only that it gave up inside a blocking call (watchdog.h) answered no
//   ping meanwhile: its host is alive, but what it was seen to miss says nothing;
// - a host that spoke, but which every other host that spoke saw silent (three hosts or
//   more): its own links are down; exit 69;
// - two hosts that both spoke, either saw the other silent, and neither is explained by the
//   rules above: the link between them drops; exit 69;
// - nothing of the above (every rank answered every ping): not localised; every host of
//   the job is a candidate, each named as one, exit 69.
// Pure (unit-tested): read_fabric_check (fabric_check.h) hands it the lines.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "launcher/preflight.h"

namespace tmpi::launch {

// The pod's hostname, as nccl-check's ranks report theirs: a name up to its first dot.
std::string short_host(const std::string& name);

struct TimeoutVerdict {
  std::vector<CheckRow> rows;  // empty: no rank gave its view (the lines of an older check)
  Exit exit = Exit::kUnavailable;
};

// `views`: the objects of the "nccl-check timeout: " lines (those with "silent_ranks" are
// views; rows are made only when one is);
// `placement`: rank -> host, as the placement check confirmed; `reason`: the step and its
// deadline, in words.
TimeoutVerdict localise_timeout(const std::vector<nlohmann::json>& views,
                                const std::vector<std::string>& placement, const std::string& backend,
                                const std::string& reason);

}  // namespace tmpi::launch

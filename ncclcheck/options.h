// What a check is asked to do: the backend, the sizes, the iterations, the thresholds and
// the step deadline, from nccl-check's flags and TMPI_ variables (main.cpp).
//
// Every rank must hold the same Options. The sweep and the pair rounds choose their sizes
// and iteration counts from them (sweep.cpp, budget.h), and a rank that chose otherwise
// would post collectives that its peers never match: MPI then moves data into buffers that
// no rank meant (seen here as a write to address 0 inside Open MPI's TCP transport, when
// --step-timeout reached the launcher's ranks through the environment and not the others).
// So init compares them first (options_disagreement) and refuses to measure anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/params.h"
#include "ncclcheck/budget.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/report.h"

namespace tmpi::check {

struct Options {
  Backend backend = Backend::kMpi;
  std::vector<std::uint64_t> sizes;
  std::uint64_t pair_bytes = 0;
  Iterations iterations;
  Threshold threshold;
  Millis step_timeout{60000};
  std::string nccl_library;  // --nccl-library: "" searches (gpu_libraries.h)
};

// The options that decide what the ranks do, one "flag value" line each, in a fixed order:
// equal texts mean equal decisions.
std::string options_text(const Options& options);

// Given every rank's options_text (rank order), nothing where all agree; else the error to
// give: the first flag that differs, rank 0's value and the first other rank's, how many
// ranks differ, and how to give every rank the same.
std::optional<std::string> options_disagreement(const std::vector<std::string>& per_rank);

}  // namespace tmpi::check

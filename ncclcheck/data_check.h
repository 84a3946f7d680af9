// The data every test moves, and its check. Rank r of a group of n sends element i as
// (i mod 61) + (r mod 61) + 1: never zero (an all-zero buffer would pass a broken
// reduction), different on every rank (a dropped contribution shows), and a float sum that
// stays exact for any realistic n (below 2^24 up to ~100,000 ranks). The output buffer is
// poisoned with NaN before each run, so that an element nobody wrote is counted wrong.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmpi::check {

void fill_pattern(float* data, std::size_t count, int rank);
void poison(float* data, std::size_t count);

// Elements of an all-reduce (sum over `ranks` ranks) that differ from the expected value.
std::int64_t count_wrong_sum(const float* data, std::size_t count, int ranks);
// Elements of a point-to-point message from `sender` that differ from its pattern.
std::int64_t count_wrong_copy(const float* data, std::size_t count, int sender);

}  // namespace tmpi::check

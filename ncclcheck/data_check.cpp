// See data_check.h.
#include "ncclcheck/data_check.h"

#include <bit>
#include <cstdint>
#include <limits>

namespace tmpi::check {

namespace {

constexpr std::size_t kPeriod = 61;  // prime, so a shifted buffer does not line up

float element(std::size_t i, int rank) {
  return static_cast<float>(i % kPeriod) + static_cast<float>(static_cast<unsigned>(rank) % kPeriod) + 1.0F;
}

}  // namespace

// The loops below walk the period with a counter: a division per element would cost more
// than the 1 GiB buffers' memory traffic.
void fill_pattern(float* data, std::size_t count, int rank) {
  float period[kPeriod];
  for (std::size_t j = 0; j < kPeriod; ++j) period[j] = element(j, rank);
  for (std::size_t i = 0, j = 0; i < count; ++i, j = j + 1 == kPeriod ? 0 : j + 1) data[i] = period[j];
}

void poison(float* data, std::size_t count) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < count; ++i) data[i] = nan;
}

std::int64_t count_wrong_sum(const float* data, std::size_t count, int ranks) {
  // sum over r of (i mod 61) + (r mod 61) + 1 = n((i mod 61) + 1) + sum over r of (r mod 61)
  double rank_part = 0;
  for (int r = 0; r < ranks; ++r) rank_part += static_cast<double>(static_cast<unsigned>(r) % kPeriod);
  float expected[kPeriod];
  for (std::size_t j = 0; j < kPeriod; ++j) {
    expected[j] = static_cast<float>(static_cast<double>(ranks) * static_cast<double>(j + 1) + rank_part);
  }
  std::int64_t wrong = 0;
  for (std::size_t i = 0, j = 0; i < count; ++i, j = j + 1 == kPeriod ? 0 : j + 1) {
    // Bitwise compare: NaN (the poison) never equals anything.
    wrong += std::bit_cast<std::uint32_t>(data[i]) != std::bit_cast<std::uint32_t>(expected[j]) ? 1 : 0;
  }
  return wrong;
}

std::int64_t count_wrong_copy(const float* data, std::size_t count, int sender) {
  float period[kPeriod];
  for (std::size_t j = 0; j < kPeriod; ++j) period[j] = element(j, sender);
  std::int64_t wrong = 0;
  for (std::size_t i = 0, j = 0; i < count; ++i, j = j + 1 == kPeriod ? 0 : j + 1) {
    wrong += std::bit_cast<std::uint32_t>(data[i]) != std::bit_cast<std::uint32_t>(period[j]) ? 1 : 0;
  }
  return wrong;
}

}  // namespace tmpi::check

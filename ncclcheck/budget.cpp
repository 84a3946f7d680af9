// See budget.h.
#include "ncclcheck/budget.h"

#include <algorithm>
#include <cmath>

namespace tmpi::check {

namespace {

constexpr double kLeastStepSeconds = 1.0;
constexpr std::uint64_t kProbeDivisor = 64;
constexpr int kWarmupShare = 5;  // a fifth of what fits warms up
constexpr int kLeastFullIterations = 6;

}  // namespace

Budgets budgets_for(Millis step_timeout) {
  double timeout = std::chrono::duration<double>(step_timeout).count();
  Budgets budgets;
  budgets.sweep = timeout / 4;
  budgets.step = std::max(kLeastStepSeconds, timeout / 20);
  budgets.reach = step_timeout / 4;
  return budgets;
}

Millis check_deadline(Millis step_timeout, int hosts) {
  auto rounds = [](int n) { return n < 2 ? 0 : (n % 2 == 0 ? n - 1 : n); };
  double step = budgets_for(step_timeout).step;
  double rest = 6 * rounds(hosts) * step;  // 1 + 2 + 1 + 2: the long look and retests fill 2 budgets
  return step_timeout + Millis(static_cast<std::int64_t>(rest * 1000));
}

std::uint64_t probe_bytes(std::uint64_t bytes) {
  std::uint64_t probe = bytes / kProbeDivisor / sizeof(float) * sizeof(float);
  return std::max<std::uint64_t>(probe, sizeof(float));
}

Iterations fit_iterations(double one, double budget, Iterations wanted) {
  int fits = wanted.warmup + wanted.timed;
  if (one > 0) fits = static_cast<int>(std::min<double>(fits, std::floor(budget / one)));
  Iterations out;
  out.warmup = std::min(wanted.warmup, fits / kWarmupShare);
  out.timed = std::clamp(fits - out.warmup, 1, std::max(wanted.timed, 1));
  return out;
}

double predict_seconds(std::uint64_t bytes, std::uint64_t measured_bytes, double seconds) {
  if (measured_bytes == 0) return seconds;
  return seconds * static_cast<double>(bytes) / static_cast<double>(measured_bytes);
}

PairChoice choose_pair(std::uint64_t full, std::uint64_t probe, double probe_seconds, double budget,
                       double stretch, Iterations wanted) {
  double predicted = predict_seconds(full, probe, probe_seconds);
  if (predicted * kLeastFullIterations <= stretch) {
    return {full, fit_iterations(predicted, std::max(budget, predicted * kLeastFullIterations), wanted)};
  }
  if (predicted <= budget) return {full, fit_iterations(predicted, budget, wanted)};
  if (probe_seconds * 2 > budget) return {probe, {0, 0}};  // no second one fits: the probe is the sample
  return {probe, fit_iterations(probe_seconds, budget, wanted)};
}

SweepChoice choose_sweep_size(double predicted, double left, std::uint64_t bytes, std::uint64_t bytes_left,
                              Iterations wanted) {
  if (predicted > left) return {};
  double share = bytes_left > 0 ? left * static_cast<double>(bytes) / static_cast<double>(bytes_left) : left;
  return {true, fit_iterations(predicted, std::max(share, predicted), wanted)};
}

bool skipped_size_is_slow(double predicted, Millis step_timeout) {
  return predicted > std::chrono::duration<double>(step_timeout).count() / 4;
}

}  // namespace tmpi::check

// See sweep.h. Every rank takes the same decisions, from the same all-reduced times: what
// is left of the budget is counted from the agreed time per iteration, never from a rank's
// own clock, so that no rank runs an iteration that another skips.
#include "ncclcheck/sweep.h"

#include <algorithm>
#include <numeric>

namespace tmpi::check {

namespace {

constexpr std::uint64_t kReachBytes = 64 * 1024;

struct Agreed {
  double seconds = 0;  // one iteration, the mean over ranks
  std::int64_t wrong = 0;
  double stall = 0;  // the mean over ranks: a collective that stops, stops every rank
};

Expected<Agreed> measure_world(Fabric& fabric, Progress& progress, const Group& group, std::uint64_t bytes,
                               Iterations iterations, const Deadline& deadline, const std::string& step,
                               int ranks) {
  TMPI_ASSIGN(Measure measure, fabric.allreduce(group, bytes, iterations, deadline, step));
  std::vector<double> sums = {measure.seconds, static_cast<double>(measure.wrong), measure.stall};
  TMPI_CHECK(allreduce_sum(progress, MPI_COMM_WORLD, sums, deadline, step));
  return Agreed{sums[0] / ranks, static_cast<std::int64_t>(sums[1]), sums[2] / ranks};
}

}  // namespace

Status sweep_world(Fabric& fabric, Progress& progress, const Options& options, const StepStarter& begin,
                   Report& report) {
  const int ranks = report.ranks;
  Group group{"world", std::vector<int>(static_cast<std::size_t>(ranks)), MPI_COMM_WORLD};
  std::iota(group.ranks.begin(), group.ranks.end(), 0);
  Budgets budgets = budgets_for(options.step_timeout);
  std::uint64_t reach_bytes = std::min(kReachBytes, probe_bytes(options.sizes.front() * 64));
  std::string step = "reach probe " + human_bytes(reach_bytes);
  Deadline reach = begin(step, budgets.reach);
  TMPI_ASSIGN(Agreed last, measure_world(fabric, progress, group, reach_bytes, {0, 1}, reach, step, ranks));
  std::uint64_t last_bytes = reach_bytes;
  double spent = last.seconds;
  std::uint64_t bytes_left = 0;
  for (std::uint64_t bytes : options.sizes) bytes_left += bytes;
  for (std::uint64_t bytes : options.sizes) {
    double predicted = predict_seconds(bytes, last_bytes, last.seconds);
    SweepChoice choice =
        choose_sweep_size(predicted, budgets.sweep - spent, bytes, bytes_left, options.iterations);
    if (!choice.run) {
      report.skipped.push_back(
          {bytes, predicted, budgets.sweep - spent, skipped_size_is_slow(predicted, options.step_timeout)});
      continue;  // the larger sizes are predicted from the same measurement, and skipped too
    }
    step = "all-reduce " + human_bytes(bytes);
    Deadline deadline = begin(step, options.step_timeout);
    TMPI_ASSIGN(last,
                measure_world(fabric, progress, group, bytes, choice.iterations, deadline, step, ranks));
    SizeResult size{bytes, last.seconds, 0, 0, last.wrong, choice.iterations.timed, last.stall};
    size.algbw = algbw_gbps(bytes, size.seconds);
    size.busbw = allreduce_busbw(size.algbw, ranks);
    report.allreduce.push_back(size);
    spent += last.seconds * (choice.iterations.warmup + choice.iterations.timed);
    last_bytes = bytes;
    bytes_left -= bytes;
  }
  return ok_status();
}

}  // namespace tmpi::check

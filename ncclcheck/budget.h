// The time budget of nccl-check's measured steps, free of MPI so that unit tests drive it
// with recorded timings of either backend. A step does not run a fixed count of iterations
// and then judge: it runs what fits its budget, from what the step before it (or a probe)
// measured, and judges the bandwidth from what finished. So a link 100 or 1000 times slower
// than its peers costs the check seconds, not a deadline, and the pair tests that name it
// always run (docs/design.md, nccl-check: "the time budget").
//
// - The sweep over every host has one budget for all its sizes (a quarter of the step
//   timeout). A reach probe (one small all-reduce) comes first; each size's time per
//   iteration is predicted from the size before it, bandwidth-bound (time grows with bytes).
//   A size whose single iteration would not fit what is left of the budget is not run; it
//   and the larger ones are recorded as skipped, with the predicted time.
// - Each per-host or per-pair step (a round) has its own budget (a twentieth of the step
//   timeout, 1 s at least). Each pair first moves a probe (1/64 of the pair size); a pair
//   whose full-size iteration would not fit is measured at the probe's size instead.
// - The deadlines: the step timeout for each step, a quarter of it for init and the reach
//   probe, so that a link that moves nothing ends the check early; and one for the whole
//   check (check_seconds), which cuts short any step that would end past it, so that the
//   check ends within a stated bound whatever the fabric does.
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace tmpi::check {

struct Iterations {
  int warmup = 5;
  int timed = 20;
};

struct Budgets {
  double sweep = 0;  // seconds for every size of the all-host sweep together
  double step = 0;   // seconds for one per-host or per-pair step
  Millis reach{0};   // the deadline of the reach probe
};
Budgets budgets_for(Millis step_timeout);

// The deadline of the whole check's steps that cross the fabric between hosts (the sweep
// and the tests of pairs of hosts), for `hosts` hosts: T + 6 R B, with T the step timeout,
// B the per-step budget and R the rounds of the pairs of hosts (hosts - 1 when even, hosts
// when odd); 6 for the first pass, the long look (two budgets: stalls.h), the second look
// and the retests (two budgets where a link stopped). At the defaults: 114 s for 3 hosts,
// 186 s for 8 (docs/design.md, nccl-check). The steps within each
// host keep their own deadlines, outside it.
Millis check_deadline(Millis step_timeout, int hosts);

// The bytes of a probe: 1/64 of `bytes`, whole floats, one float at least.
std::uint64_t probe_bytes(std::uint64_t bytes);

// The iterations that fit `budget` seconds at `one` seconds each: warm-ups (a fifth of what
// fits, at most `wanted.warmup`) and then timed ones (at most `wanted.timed`); 1 timed
// iteration at least, since the caller has found that one fits.
Iterations fit_iterations(double one, double budget, Iterations wanted);

// The time of one iteration of `bytes`, from one of `measured_bytes` that took `seconds`.
double predict_seconds(std::uint64_t bytes, std::uint64_t measured_bytes, double seconds);

// What a pair test moves after its probe of `probe` bytes took `probe_seconds`: the full
// size if one iteration fits `budget`, else the probe's size; no timed iteration (the
// probe is the sample) where not even two of the probe's would fit.
struct PairChoice {
  std::uint64_t bytes = 0;
  Iterations iterations;
};
// A full-size test that fits `stretch` (the sweep's budget) 6 times gets 1 warm-up and 5
// timed iterations at least, past `budget` if need be: a healthy link on a loaded host must
// not be judged from 2 samples.
PairChoice choose_pair(std::uint64_t full, std::uint64_t probe, double probe_seconds, double budget,
                       double stretch, Iterations wanted);

// The sweep: whether a size whose iteration should take `predicted` s is run with `left` s
// of the sweep's budget left, and with how many iterations (its share of what is left is
// its bytes' share of the sizes still to run).
struct SweepChoice {
  bool run = false;
  Iterations iterations;
};
SweepChoice choose_sweep_size(double predicted, double left, std::uint64_t bytes, std::uint64_t bytes_left,
                              Iterations wanted);

// A skipped size is a finding (a culprit, if no test of a host or link explains it) only
// when one iteration of it would take more than a quarter of the step timeout: a sweep
// that its budget trims on a loaded but healthy fabric is no fault.
bool skipped_size_is_slow(double predicted, Millis step_timeout);

}  // namespace tmpi::check

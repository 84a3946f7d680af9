// nccl-check: the GPU-fabric preflight, an MPI program (every rank runs this main).
//   mpirun ... nccl-check [--backend nccl|mpi] [--min-bytes 1M --max-bytes 256M] [--json FILE|-]
// Rank 0 prints the table and writes the JSON report. A rank that hits a deadline prints
// its own report (result "timeout") and aborts the job with exit 75, so nothing hangs.
// The calls that block with no deadline of their own (MPI_Init, a communicator's creation,
// MPI_Finalize) run under the watchdog (watchdog.h), whose callback here ends the rank.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/cli.h"
#include "common/files.h"
#include "common/log.h"
#include "common/params.h"
#include "common/utf8.h"
#include "ncclcheck/driver.h"
#include "ncclcheck/watchdog.h"

#if defined(__SANITIZE_ADDRESS__)
// MPI libraries keep their allocations until exit; their leaks are not ours to report. And
// nss_wrapper may be preloaded before ASan (common/cli.cpp).
extern "C" const char* __asan_default_options() {
  return "detect_leaks=0:verify_asan_link_order=0";
}  // NOLINT
#endif

namespace tmpi::check {

namespace {

constexpr const char* kSynopsis = "mpirun [MPI options] nccl-check [options]";
constexpr std::uint64_t kMaxBytes = std::uint64_t{4} << 30;  // MPI counts are ints: 2^31 floats at most

// The largest all-reduce when --max-bytes is not given. NCCL: nccl-tests' usual 256M, which
// an NVLink or InfiniBand fabric moves in milliseconds. MPI, the CPU twin: its TCP or shared
// memory is bandwidth-bound long before 64M, and 256M x 25 iterations took 47 s of a 60 s
// step on 3 pods of 2 shared cores, a default too slow to be run by CI.
std::uint64_t default_max_bytes(Backend backend) {
  return backend == Backend::kNccl ? std::uint64_t{256} << 20 : std::uint64_t{64} << 20;
}

Expected<Options> options_from(const Params& params) {
  Options options;
  options.backend = params.choice(param::kBackend, kBackendSpellings);
  std::uint64_t max_bytes =
      params.is_set(param::kMaxBytes) ? params.bytes(param::kMaxBytes) : default_max_bytes(options.backend);
  if (max_bytes > kMaxBytes || params.bytes(param::kPairBytes) > kMaxBytes) {
    return make_error(Exit::kUsage, "--max-bytes and --pair-bytes: 4G at most (MPI counts are 32-bit)");
  }
  TMPI_ASSIGN(options.sizes,
              size_ladder(params.bytes(param::kMinBytes), max_bytes, params.integer(param::kStepFactor)));
  options.pair_bytes = params.bytes(param::kPairBytes);
  if (options.pair_bytes < 4)
    return make_error(Exit::kUsage, "--pair-bytes {}: must hold one float", options.pair_bytes);
  options.iterations = {static_cast<int>(params.integer(param::kWarmup)),
                        static_cast<int>(params.integer(param::kIters))};
  if (options.iterations.timed < 1 || options.iterations.warmup < 0) {
    return make_error(Exit::kUsage,
                      "--iters {} --warmup {}: need 1 or more timed and 0 or more warm-up iterations",
                      options.iterations.timed, options.iterations.warmup);
  }
  options.threshold = {params.number(param::kMinBusbw), params.number(param::kMinFraction)};
  if (options.threshold.min_fraction < 0 || options.threshold.min_fraction > 1) {
    return make_error(Exit::kUsage, "--min-fraction {}: must be between 0 and 1",
                      options.threshold.min_fraction);
  }
  options.step_timeout = params.duration(param::kStepTimeout);
  options.nccl_library = params.str(param::kNcclLibrary);
  return options;
}

// One write, so that mpirun does not interleave other ranks' lines into the table. With
// --json - the report travels on stdout through mpirun's output forwarding, which keeps a
// rank's stdout in order but not its stdout beside its stderr: a line on stderr after the
// report was seen to land inside it (the launcher then had no report). So the rank's last
// word (why it fails or aborts) goes into the same write, before the report, and nothing
// follows it on stderr.
void publish(const Report& report, const std::string& json_path, const std::string& last_word) {
  std::string out = render_table(report);
  std::string json = dump_json(to_json(report));
  bool on_stdout = json_path == "-";
  if (on_stdout && !last_word.empty()) out += "nccl-check: " + last_word + "\n";
  if (on_stdout) out += "nccl-check report: " + json + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (!on_stdout && !last_word.empty())
    spdlog::error("{}", last_word);  // redacted, and JSON with --log-format json
  if (!json_path.empty() && !on_stdout) {
    if (auto written = write_atomic(json_path, json + "\n"); !written) {
      std::cerr << "nccl-check: the report was not written: " << written.error().message << "\n";
    }
  }
}

// What a rank knows before MPI_Init: enough to say, if MPI_Init never returns, who gave up
// and where. The options are read as body() reads them; where they do not parse, the
// defaults stand here (body() names the mistake, once MPI runs).
struct Early {
  int rank = -1;  // -1: no launcher said (a singleton run)
  std::string host, json_path;
  Backend backend = Backend::kNccl;
  Millis step_timeout{60'000};
};

Early early_view(int argc, char** argv) {
  Early early;
  // Each launcher's word for the rank: Open MPI's, PMIx's, MPICH hydra's (PMI).
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0 && rank < (1L << 30)) early.rank = static_cast<int>(rank);
    break;
  }
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  early.host = name;
  auto params =
      Params::parse(kScopeCheck, std::vector<std::string>(argv + 1, argv + argc), current_environment());
  if (params && !params->help_requested()) {
    early.backend = params->choice(param::kBackend, kBackendSpellings);
    early.json_path = params->str(param::kJson);
    early.step_timeout = params->duration(param::kStepTimeout);
  }
  return early;
}

// The watchdog's callback (watchdog.h): `step`, a blocking call, outlived `budget`. The rank
// says so on one line that the launcher reads ("nccl-check timeout: " and a JSON object; the
// ranks that never say it are the silent ones, and so are those that stood still: see
// watchdog.h), and rank 0 publishes its report as after any timeout. Then it waits for its peers, whose
// watches started a little apart, to say theirs, and ends: exit 75, with _exit(), since MPI cannot be shut
// down from beside a call that does not return.
[[noreturn]] void give_up(const Early& early, const std::string& step, Millis budget, Millis stood_still) {
  double seconds = std::chrono::duration<double>(budget).count();
  double still = std::chrono::duration<double>(stood_still).count();
  nlohmann::json line = {{"rank", early.rank},
                         {"host", early.host},
                         {"step", step},
                         {"after_seconds", seconds},
                         {"stood_still_seconds", std::round(still * 10) / 10},
                         {"backend", backend_name(early.backend)}};
  std::string text = fmt::format(
      "nccl-check: rank {} on {}: {} did not finish within {} s; giving up (exit {}){}\n", early.rank,
      log::printable(early.host), step, seconds, static_cast<int>(Exit::kTempFail),
      still >= 1.0 ? fmt::format("; this rank stood still for {:.1f} s meanwhile (stopped?)", still) : "");
  text += "nccl-check timeout: " + dump_json(line) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (early.rank <= 0) {
    Report report;
    report.backend = early.backend;
    report.timeout = Timeout{step, seconds, std::max(early.rank, 0), early.host, {}, {}, true};
    publish(
        report, early.json_path,
        fmt::format("{} timed out; ending the rank with exit {}", step, static_cast<int>(Exit::kTempFail)));
  }
  std::this_thread::sleep_for(std::clamp(budget / 2, Millis(2000), Millis(30'000)));
  _exit(static_cast<int>(Exit::kTempFail));
}

// After a measured step's deadline, every rank says which peers answered its pings, on the
// line that the launcher reads ("nccl-check timeout: "): from every rank's view together it
// tells a silent host from a link that drops (launcher/fabric_timeout.h). Then the rank
// answers pings a while, so that the peers still asking see it alive, and rank 0 (first)
// publishes the report and aborts the job; the others wait longer, for rank 0's report.
void say_timeout(const Report& report, Progress& progress, int rank) {
  const Timeout& timeout = *report.timeout;
  nlohmann::json line = {{"rank", rank},
                         {"host", timeout.host},
                         {"step", timeout.step},
                         {"after_seconds", timeout.after_seconds},
                         {"backend", backend_name(report.backend)},
                         {"silent_ranks", timeout.silent_ranks}};
  std::string text = "nccl-check timeout: " + dump_json(line) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  Deadline linger(rank == 0 ? Millis(3000) : Millis(6000));
  while (!linger.expired()) {
    progress.serve();
    std::this_thread::sleep_for(Millis(2));
  }
}

// Why rank 0 fails, in a line; empty for a pass.
std::string verdict(const Report& report) {
  if (report.exit_code() == 0) return "";
  if (!report.failure.empty()) return report.failure;
  return fmt::format("{} culprit(s) below threshold or with wrong data: see the table",
                     report.culprits.size());
}

Status body(Watchdog& watchdog, const std::vector<std::string>& args) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TMPI_ASSIGN(Params params, Params::parse(kScopeCheck, args, current_environment()));
  if (params.help_requested()) {
    if (rank == 0) std::cout << help_text(kSynopsis, kScopeCheck);
    return ok_status();
  }
  TMPI_CHECK(log::setup_from("nccl-check", params));
  TMPI_ASSIGN(Options options, options_from(params));
  Progress progress(MPI_COMM_WORLD, watchdog, blocking_budget(options.step_timeout));
  Outcome outcome = run_check(options, progress);
  const Report& report = outcome.report;
  if (outcome.abort) {
    if (report.timeout) say_timeout(report, progress, rank);
    std::string why = report.timeout ? fmt::format("{} timed out", report.timeout->step) : report.failure;
    publish(report, params.str(param::kJson),
            fmt::format("{}; aborting the job with exit {}", why, report.exit_code()));
    MPI_Abort(MPI_COMM_WORLD, report.exit_code());
  }
  if (rank == 0) publish(report, params.str(param::kJson), verdict(report));
  // Rank 0 alone exits with the verdict's code (it said why in publish). Were the others to
  // exit non-zero too, the first of them would make mpirun abort the job while rank 0's
  // report may still be on its way through mpirun's output forwarding (a CI run here lost
  // the report's first half so).
  if (report.exit_code() == 0 || rank != 0) return ok_status();
  return Error{job_exit(report.exit_code()), ""};
}

}  // namespace

}  // namespace tmpi::check

int main(int argc, char** argv) {
  using namespace tmpi::check;
  const Early early = early_view(argc, argv);
  Watchdog watchdog([&early](const std::string& step, tmpi::Millis budget, tmpi::Millis stood_still) {
    give_up(early, step, budget, stood_still);
  });
  tmpi::Millis budget = blocking_budget(early.step_timeout);
  watchdog.guard("MPI_Init", budget, [&] { MPI_Init(&argc, &argv); });
  int code = tmpi::cli::run("nccl-check", argc, argv,
                            [&](const std::vector<std::string>& args) { return body(watchdog, args); });
  watchdog.guard("MPI_Finalize", budget, [] { MPI_Finalize(); });
  return code;
}

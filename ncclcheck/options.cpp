// See options.h. The texts are compared line by line, so that the error names the flag
// rather than saying only that two ranks differ.
#include "ncclcheck/options.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "ncclcheck/report.h"

namespace tmpi::check {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "--step-timeout 60s" -> {"--step-timeout", "60s"}; a line without a space is all flag.
std::pair<std::string, std::string> flag_and_value(const std::string& line) {
  auto space = line.find(' ');
  if (space == std::string::npos) return {line, ""};
  return {line.substr(0, space), line.substr(space + 1)};
}

}  // namespace

std::string options_text(const Options& options) {
  std::vector<std::string> sizes;
  sizes.reserve(options.sizes.size());
  for (std::uint64_t bytes : options.sizes) sizes.push_back(human_bytes(bytes));
  return fmt::format(
      "--backend {}\nsizes {}\n--pair-bytes {}\n--warmup {}\n--iters {}\n--min-busbw {}\n--min-fraction {}\n"
      "--step-timeout {}\n",
      backend_name(options.backend), fmt::join(sizes, ","), human_bytes(options.pair_bytes),
      options.iterations.warmup, options.iterations.timed, options.threshold.min_gbps,
      options.threshold.min_fraction, format_duration(options.step_timeout));
}

std::optional<std::string> options_disagreement(const std::vector<std::string>& per_rank) {
  if (per_rank.empty()) return std::nullopt;
  const std::string& first = per_rank.front();
  auto differs = [&](const std::string& text) { return text != first; };
  auto other = std::find_if(per_rank.begin() + 1, per_rank.end(), differs);
  if (other == per_rank.end()) return std::nullopt;
  auto count = std::count_if(per_rank.begin() + 1, per_rank.end(), differs);
  auto mine = lines_of(first), theirs = lines_of(*other);
  std::string flag = "the options", here = "(unreadable)", there = "(unreadable)";
  for (std::size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    std::string a = i < mine.size() ? mine[i] : "", b = i < theirs.size() ? theirs[i] : "";
    if (a == b) continue;
    auto [flag_a, value_a] = flag_and_value(a);
    auto [flag_b, value_b] = flag_and_value(b);
    flag = flag_a.empty() ? flag_b : flag_a;
    here = value_a;
    there = value_b;
    break;
  }
  if (flag == "sizes") flag = "the sizes (--min-bytes, --max-bytes, --step-factor)";
  return fmt::format(
      "the ranks were given different options, and would run different tests: {} is {} on rank 0 but {} on "
      "rank {} ({} of {} rank(s) differ from rank 0). Give every rank the same: put the flags on "
      "nccl-check's "
      "command line, or pass each of its variables to every rank (mpirun -x NAME; a variable set in the "
      "launcher's container reaches only the ranks that mpirun starts there)",
      flag, here, there, other - per_rank.begin(), count, per_rank.size());
}

}  // namespace tmpi::check

// See driver.h.
#include "ncclcheck/driver.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/utf8.h"
#include "ncclcheck/cpus.h"
#include "ncclcheck/stalls.h"
#include "ncclcheck/sweep.h"
#include "ncclcheck/verdict.h"

namespace tmpi::check {

namespace {

constexpr int kHostCommTag = 17;

class CheckRun {
 public:
  CheckRun(const Options& options, Progress& progress) : options_(options), progress_(progress) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    host_name_ = name;
    report_.backend = options.backend;
    report_.ranks = size_;
    report_.pair_bytes = options.pair_bytes;
  }

  // After a failed wait, a collective may still be pending on the host's communicator, and the job
  // is aborted next: it is left as it is. Open MPI's non-blocking collectives go on over a freed
  // communicator, and crashed so (a NULL read in mca_pml_ob1_isend while the rank answered pings).
  ~CheckRun() {
    if (node_comm_ != MPI_COMM_NULL && progress_.failed_waits() == 0) MPI_Comm_free(&node_comm_);
  }
  CheckRun(const CheckRun&) = delete;
  CheckRun& operator=(const CheckRun&) = delete;

  Status run() {
    TMPI_CHECK(init());
    whole_.emplace(check_deadline(options_.step_timeout, static_cast<int>(report_.hosts.size())));
    TMPI_CHECK(sweep_world(
        *fabric_, progress_, options_,
        [this](std::string step, Millis deadline) { return begin(std::move(step), deadline); }, report_));
    // The steps within each host do not cross the fabric between hosts: they keep their own
    // deadlines, outside the whole check's (its clock stops for them).
    Millis left = whole_->remaining();
    whole_.reset();
    TMPI_CHECK(nodes());
    TMPI_CHECK(gpu_links());
    whole_.emplace(left);
    TMPI_CHECK(links());
    judge(report_, options_.threshold);
    return ok_status();
  }

  Report& report() { return report_; }
  const std::string& step() const { return step_; }
  Millis step_deadline() const { return step_deadline_; }
  const std::string& host_name() const { return host_name_; }
  int rank() const { return rank_; }
  std::vector<int> host_of_ranks() const { return host_of_; }

 private:
  // A step's deadline: its own, or the whole check's where that comes first (budget.h).
  Deadline begin(std::string step, Millis deadline) {
    step_ = std::move(step);
    if (whole_) deadline = std::min(deadline, whole_->remaining());
    step_deadline_ = deadline;
    return Deadline(deadline);
  }
  Deadline begin(std::string step) { return begin(std::move(step), options_.step_timeout); }

  // Hosts in rank order, each rank's host and local rank; the backend, agreed by all.
  Status init() {
    // A quarter of the usual deadline (10 s at least): init moves a few KiB (budget.h).
    Deadline deadline = begin("init", std::max(budgets_for(options_.step_timeout).reach, Millis(10'000)));
    TMPI_ASSIGN(auto given,
                allgather_text(progress_, MPI_COMM_WORLD, options_text(options_), deadline, step_));
    if (auto disagreement = options_disagreement(given)) {  // every rank finds the same
      report_.failure = *disagreement;
      report_.failure_exit = Exit::kUsage;
      return Error{Exit::kUsage, *disagreement};
    }
    TMPI_ASSIGN(auto names, allgather_text(progress_, MPI_COMM_WORLD, host_name_, deadline, step_));
    for (int r = 0; r < size_; ++r) {
      const std::string& name = names[static_cast<std::size_t>(r)];
      auto it = std::find_if(report_.hosts.begin(), report_.hosts.end(),
                             [&](const HostInfo& h) { return h.name == name; });
      if (it == report_.hosts.end()) {
        HostInfo host;
        host.name = name;
        it = report_.hosts.insert(report_.hosts.end(), host);
      }
      it->ranks.push_back(r);
      host_of_.push_back(static_cast<int>(it - report_.hosts.begin()));
    }
    my_host_ = host_of_[static_cast<std::size_t>(rank_)];
    const auto& mine = report_.hosts[static_cast<std::size_t>(my_host_)].ranks;
    local_rank_ = static_cast<int>(std::find(mine.begin(), mine.end(), rank_) - mine.begin());
    // Over this host's ranks only (MPI_Comm_create_group), not a world split, which waits for
    // every rank: a dead link between two other hosts would hold it where no deadline reaches.
    MPI_Group world_group = MPI_GROUP_NULL, host_group = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, static_cast<int>(mine.size()), mine.data(), &host_group);
    progress_.blocking(step_, "MPI_Comm_create_group",
                       [&] { MPI_Comm_create_group(MPI_COMM_WORLD, host_group, kHostCommTag, &node_comm_); });
    MPI_Group_free(&host_group);
    MPI_Group_free(&world_group);
    TMPI_ASSIGN(auto affinities,
                allgather_text(progress_, MPI_COMM_WORLD, own_affinity_text(), deadline, step_));
    std::vector<std::vector<Affinity>> ranks_of_host(report_.hosts.size());
    for (int r = 0; r < size_; ++r) {
      ranks_of_host[static_cast<std::size_t>(host_of_[static_cast<std::size_t>(r)])].push_back(
          parse_affinity(affinities[static_cast<std::size_t>(r)]));
    }
    auto shares = cpu_shares(ranks_of_host);
    for (std::size_t h = 0; h < report_.hosts.size(); ++h) {
      auto& host = report_.hosts[h];
      host.cpus = static_cast<int>(shares[h].cpus);
      host.machine_ranks = static_cast<int>(shares[h].ranks);
      host.machine_hosts = static_cast<int>(shares[h].hosts);
      host.shares_cpus = options_.backend == Backend::kMpi && shares[h].shared;
    }
    return open_fabric(deadline);
  }

  // The backend on every rank; the first problem of any rank ends the check for all.
  Status open_fabric(const Deadline& deadline) {
    Expected<std::unique_ptr<Fabric>> made =
        options_.backend == Backend::kNccl
            ? make_nccl_fabric(progress_, local_rank_, host_name_, options_.nccl_library)
            : Expected<std::unique_ptr<Fabric>>(make_mpi_fabric(progress_));
    // Each rank's problem as "CODE MESSAGE": a 78 (no NCCL in the image) anywhere wins over 69.
    std::string problem_here =
        made ? "" : fmt::format("{} {}", static_cast<int>(made.error().exit), made.error().message);
    TMPI_ASSIGN(auto problems, allgather_text(progress_, MPI_COMM_WORLD, problem_here, deadline, step_));
    std::set<std::string> distinct;
    for (const auto& problem : problems) {
      auto space = problem.find(' ');
      if (space == std::string::npos) continue;
      if (problem.compare(0, space, std::to_string(static_cast<int>(Exit::kConfig))) == 0)
        report_.failure_exit = Exit::kConfig;
      std::string message = problem.substr(space + 1);
      if (distinct.insert(message).second) report_.failure += (report_.failure.empty() ? "" : "; ") + message;
    }
    if (!report_.failure.empty()) return Error{report_.failure_exit, report_.failure};
    fabric_ = std::move(made).value();
    report_.library = fabric_->library();
    TMPI_ASSIGN(auto devices,
                allgather_text(progress_, MPI_COMM_WORLD, dump_json(fabric_->device()), deadline, step_));
    for (int r = 0; r < size_; ++r) {
      auto device = nlohmann::json::parse(devices[static_cast<std::size_t>(r)], nullptr, false);
      if (!device.is_null() && !device.is_discarded()) {
        report_.hosts[static_cast<std::size_t>(host_of_[static_cast<std::size_t>(r)])].devices.push_back(
            device);
      }
    }
    return ok_status();
  }

  // One all-reduce within each host that has more than one rank, all hosts at once.
  Status nodes() {
    Deadline deadline = begin("intra-node all-reduce " + human_bytes(options_.pair_bytes));
    const auto& mine = report_.hosts[static_cast<std::size_t>(my_host_)].ranks;
    std::vector<double> samples(2 * report_.hosts.size(), 0.0);  // per host: busbw, wrong
    if (mine.size() > 1) {
      Group group{fmt::format("host {}", my_host_), mine, node_comm_};
      TMPI_ASSIGN(Measure measure,
                  fabric_->allreduce(group, options_.pair_bytes, options_.iterations, deadline, step_));
      std::vector<double> sums = {measure.seconds, static_cast<double>(measure.wrong)};
      TMPI_CHECK(allreduce_sum(progress_, node_comm_, sums, deadline, step_));
      if (rank_ == mine.front()) {
        double seconds = sums[0] / static_cast<double>(mine.size());
        samples[2 * static_cast<std::size_t>(my_host_)] =
            allreduce_busbw(algbw_gbps(options_.pair_bytes, seconds), static_cast<int>(mine.size()));
        samples[2 * static_cast<std::size_t>(my_host_) + 1] = sums[1];
      }
    }
    TMPI_CHECK(allreduce_sum(progress_, MPI_COMM_WORLD, samples, deadline, step_));
    for (std::size_t h = 0; h < report_.hosts.size(); ++h) {
      if (report_.hosts[h].ranks.size() < 2) continue;
      report_.nodes.push_back(
          {static_cast<int>(h), samples[2 * h], static_cast<std::int64_t>(samples[2 * h + 1])});
    }
    return ok_status();
  }

  // Within every host at once, every pair of its ranks (its GPUs), in rounds of disjoint
  // pairs, so that a slow GPU or NVLink is named, not only its host; then the second look
  // at each slow pair (metrics.h), before anything is judged.
  Status gpu_links() {
    GpuPlan plan;
    for (const auto& host : report_.hosts) plan.push_back(pair_rounds(static_cast<int>(host.ranks.size())));
    TMPI_CHECK(gpu_pass(plan, "GPU pairs", report_.gpu_links));
    double floor = gpu_floor(report_, options_.threshold);
    GpuPlan again(report_.hosts.size());
    std::size_t slow = 0;
    for (std::size_t h = 0; h < report_.hosts.size(); ++h) {
      if (report_.hosts[h].shares_cpus) continue;  // not judged: no second look either
      again[h] = second_look_rounds(gpu_links_of_host(report_, static_cast<int>(h)), floor, /*alone=*/true);
      slow += again[h].size();
    }
    if (slow == 0) return ok_status();
    std::vector<GpuLink> second;
    TMPI_CHECK(gpu_pass(again, "GPU pairs, second look", second));
    for (auto& gpu : report_.gpu_links) {
      std::vector<LinkSample> one{gpu.link}, looks;
      for (const auto& look : second) {
        if (look.host == gpu.host) looks.push_back(look.link);
      }
      merge_second_look(one, looks);
      gpu.link = one.front();
    }
    return ok_status();
  }
  // [host][round]: the disjoint pairs of that host's local ranks that it tests in that round.
  using GpuPlan = std::vector<std::vector<std::vector<Pair>>>;
  // One pass of GPU pair tests, every host at once; a host with fewer rounds sits out the rest.
  Status gpu_pass(const GpuPlan& plan, const std::string& what, std::vector<GpuLink>& out) {
    std::size_t rounds = 0;
    for (const auto& host : plan) rounds = std::max(rounds, host.size());
    const auto& mine = report_.hosts[static_cast<std::size_t>(my_host_)].ranks;
    for (std::size_t r = 0; r < rounds; ++r) {
      Deadline deadline = begin(fmt::format("{} round {}/{}", what, r + 1, rounds));
      std::vector<std::size_t> offset;  // each host's first slot this round
      std::size_t total = 0;
      for (const auto& host : plan) {
        offset.push_back(total);
        total += r < host.size() ? host[r].size() : 0;
      }
      std::vector<double> samples(2 * total, 0.0);  // per host and pair: GB/s, wrong
      const auto& my_rounds = plan[static_cast<std::size_t>(my_host_)];
      for (std::size_t p = 0; r < my_rounds.size() && p < my_rounds[r].size(); ++p) {
        auto [a, b] = my_rounds[r][p];
        if (local_rank_ != a && local_rank_ != b) continue;
        Group group{fmt::format("gpus {} {}-{}", my_host_, a, b),
                    {mine[static_cast<std::size_t>(a)], mine[static_cast<std::size_t>(b)]},
                    MPI_COMM_NULL};
        TMPI_ASSIGN(Measure measure,
                    fabric_->link(group, options_.pair_bytes, options_.iterations, deadline, step_));
        std::size_t slot = 2 * (offset[static_cast<std::size_t>(my_host_)] + p);
        if (local_rank_ == a) samples[slot] = fabric_->link_gbps(options_.pair_bytes, measure.seconds, 2);
        samples[slot + 1] = static_cast<double>(measure.wrong);
        break;
      }
      TMPI_CHECK(allreduce_sum(progress_, MPI_COMM_WORLD, samples, deadline, step_));
      for (std::size_t h = 0; h < plan.size(); ++h) {
        if (r >= plan[h].size()) continue;
        for (std::size_t p = 0; p < plan[h][r].size(); ++p) {
          std::size_t slot = 2 * (offset[h] + p);
          out.push_back({static_cast<int>(h),
                         {plan[h][r][p], samples[slot], static_cast<std::int64_t>(samples[slot + 1])}});
        }
      }
    }
    return ok_status();
  }

  // Every pair of hosts once, in rounds of disjoint pairs; a second look at each slow link;
  // then each suspect again, beside a good peer.
  Status links() {
    int hosts = static_cast<int>(report_.hosts.size());
    auto rounds = pair_rounds(hosts);
    TMPI_CHECK(link_pass(rounds, "links", report_.links));
    // The sweep stopped and no link test did: every pair again, for two rounds' budgets (stalls.h).
    std::vector<LinkSample> again;
    if (is_stall(longest_sweep_stall(report_.allreduce).seconds) &&
        hosts_of_stalled_links(report_.links).empty()) {
      TMPI_CHECK(link_pass(rounds, "links, long look,", again, /*fill_budget=*/true));
    }
    report_.link_floor = floor_for(options_.threshold, link_reference(report_.links, hosts));
    TMPI_CHECK(
        link_pass(second_look_rounds(report_.links, report_.link_floor), "links, second look,", again));
    merge_second_look(report_.links, again);
    std::set<int> stopped = hosts_of_stalled_links(report_.links);
    return link_pass(retest_rounds(report_.links, report_.link_floor, hosts, stopped), "retests",
                     report_.retests, /*fill_budget=*/!stopped.empty());
  }

  Status link_pass(const std::vector<std::vector<Pair>>& rounds, std::string_view what,
                   std::vector<LinkSample>& out, bool fill_budget = false) {
    for (std::size_t r = 0; r < rounds.size(); ++r) {
      TMPI_CHECK(
          link_round(rounds[r], fmt::format("{} round {}/{}", what, r + 1, rounds.size()), out, fill_budget));
    }
    return ok_status();
  }

  // The ranks of the test of the link between hosts a and b (fabric.h).
  Group link_group(Pair pair) const {
    Group group{fmt::format("link {}-{}", pair.first, pair.second), {}, MPI_COMM_NULL};
    for (int host : {pair.first, pair.second}) {
      const auto& ranks = report_.hosts[static_cast<std::size_t>(host)].ranks;
      group.ranks.insert(group.ranks.end(), ranks.begin(),
                         fabric_->links_use_every_rank() ? ranks.end() : ranks.begin() + 1);
    }
    std::sort(group.ranks.begin(), group.ranks.end());
    return group;
  }

  // One round of disjoint pairs of hosts under the step's budget (budget.h): each pair moves a probe,
  // all agree on the probes' times, then each runs what fits (with `fill_budget`, all of it: stalls.h).
  Status link_round(const std::vector<Pair>& pairs, std::string step, std::vector<LinkSample>& out,
                    bool fill_budget = false) {
    Deadline deadline = begin(std::move(step));
    int mine = -1;
    Group group;
    for (std::size_t p = 0; p < pairs.size() && mine < 0; ++p) {
      group = link_group(pairs[p]);
      if (group.index_of(rank_) >= 0) mine = static_cast<int>(p);
    }
    const std::uint64_t probe = probe_bytes(options_.pair_bytes);
    std::vector<double> probes(pairs.size(), 0.0);
    std::vector<double> samples(4 * pairs.size(), 0.0);  // per pair: GB/s, wrong, bytes, stall
    auto slot = static_cast<std::size_t>(std::max(mine, 0));
    Measure probed;
    if (mine >= 0) {
      TMPI_ASSIGN(probed, fabric_->link(group, probe, {0, 1}, deadline, step_));
      if (rank_ == group.ranks.front()) probes[slot] = probed.seconds * fabric_->transfers_per_iteration();
      samples[4 * slot + 1] = static_cast<double>(probed.wrong);
    }
    TMPI_CHECK(allreduce_sum(progress_, MPI_COMM_WORLD, probes, deadline, step_));
    if (mine >= 0) {
      Budgets budgets = budgets_for(options_.step_timeout);
      PairChoice choice = choose_pair(options_.pair_bytes, probe, probes[slot], budgets.step, budgets.sweep,
                                      options_.iterations);
      if (fill_budget) {
        double at_1_gbps = fabric_->link_gbps(probe, 1.0, static_cast<int>(group.ranks.size())) *
                           fabric_->transfers_per_iteration();
        choice = choose_retest_of_a_stop({options_.pair_bytes, probe, probes[slot], at_1_gbps, pairs[slot]},
                                         report_.links, report_.link_floor, budgets, options_.iterations);
      }
      Measure measure = probed;
      if (choice.iterations.timed > 0) {
        TMPI_ASSIGN(measure, fabric_->link(group, choice.bytes, choice.iterations, deadline, step_));
      } else {
        measure.wrong = 0;  // counted with the probe's above
      }
      if (rank_ == group.ranks.front()) {
        samples[4 * slot] =
            fabric_->link_gbps(choice.bytes, measure.seconds, static_cast<int>(group.ranks.size()));
        samples[4 * slot + 2] = static_cast<double>(choice.bytes);
        samples[4 * slot + 3] = std::max(measure.stall, probed.stall);
      }
      samples[4 * slot + 1] += static_cast<double>(measure.wrong);
    }
    TMPI_CHECK(allreduce_sum(progress_, MPI_COMM_WORLD, samples, deadline, step_));
    for (std::size_t p = 0; p < pairs.size(); ++p) {
      out.push_back({pairs[p], samples[4 * p], static_cast<std::int64_t>(samples[4 * p + 1]),
                     static_cast<std::uint64_t>(samples[4 * p + 2]), samples[4 * p + 3]});
    }
    return ok_status();
  }

  const Options& options_;
  Progress& progress_;
  Report report_;
  int rank_ = 0, size_ = 1, my_host_ = 0, local_rank_ = 0;  // local: index among my host's ranks
  std::string host_name_, step_;
  Millis step_deadline_{0};
  std::optional<Deadline> whole_;  // the whole check's, from the end of init
  std::vector<int> host_of_;       // world rank -> index in report_.hosts
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  std::unique_ptr<Fabric> fabric_;
};

}  // namespace

Outcome run_check(const Options& options, Progress& progress) {
  double start = MPI_Wtime();
  CheckRun run(options, progress);
  Status status = run.run();
  Outcome outcome{std::move(run.report()), false};
  Report& report = outcome.report;
  if (!status && status.error().exit == Exit::kTempFail) {
    Timeout timeout{
        run.step(), std::chrono::duration<double>(run.step_deadline()).count(), 0, run.host_name(), {}, {}};
    MPI_Comm_rank(MPI_COMM_WORLD, &timeout.rank);
    timeout.silent_ranks = progress.silent_ranks(Millis(2000));
    timeout.silent_hosts = hosts_of_ranks(report, run.host_of_ranks(), timeout.silent_ranks);
    report.timeout = timeout;
    outcome.abort = true;
  } else if (!status && report.failure.empty()) {  // not the failure that every rank agreed on in init
    report.failure = fmt::format("rank {} on {}: {}", report.ranks > 0 ? run.rank() : 0, run.host_name(),
                                 status.error().message);
    outcome.abort = true;
  }
  report.seconds = MPI_Wtime() - start;
  return outcome;
}

}  // namespace tmpi::check

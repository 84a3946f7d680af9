// The launcher's side of nccl-check: which backend --check auto picks, the command it
// runs, and how it reads the output into preflight rows, exit codes and the TrainJob status.
#include "launcher/fabric_check.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "launcher/options.h"
#include "launcher/status_feed.h"

namespace tmpi::launch {
namespace {

Topology hosts_with_gpus(std::vector<int> gpus) {
  Topology topology;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    Host host;
    host.name = "job-node-0-" + std::to_string(i) + ".job";
    host.gpus = gpus[i];
    topology.hosts.push_back(host);
  }
  return topology;
}

TEST(FabricCheck, AutoPicksNcclOnlyWhenEveryHostHasGpus) {
  EXPECT_EQ(fabric_backend(FabricBackend::kAuto, hosts_with_gpus({8, 8}), 0), FabricBackend::kNccl);
  EXPECT_EQ(fabric_backend(FabricBackend::kAuto, hosts_with_gpus({8, 0}), 8), FabricBackend::kMpi);
  EXPECT_EQ(fabric_backend(FabricBackend::kAuto, hosts_with_gpus({}), 8), FabricBackend::kMpi);
  EXPECT_EQ(fabric_backend(FabricBackend::kMpi, hosts_with_gpus({8}), 8), FabricBackend::kMpi);
  EXPECT_EQ(fabric_backend(FabricBackend::kNone, hosts_with_gpus({8}), 8), FabricBackend::kNone);
  EXPECT_EQ(fabric_backend(FabricBackend::kNccl, hosts_with_gpus({0}), 0), FabricBackend::kNccl);
}

// Trainer's hostfile says nothing of GPUs (every count 0): the launcher's own container,
// which runs ranks too and has the same resourcesPerNode, decides (the runtimes' case).
TEST(FabricCheck, AutoAsksTheLaunchersGpusWhereTheTopologyKnowsNone) {
  EXPECT_EQ(fabric_backend(FabricBackend::kAuto, hosts_with_gpus({0, 0}), 4), FabricBackend::kNccl);
  EXPECT_EQ(fabric_backend(FabricBackend::kAuto, hosts_with_gpus({0, 0}), 0), FabricBackend::kMpi);
}

TEST(FabricCheck, VisibleGpusCountsTheDeviceNodesOfGpusAlone) {
  auto dir = std::filesystem::temp_directory_path() / ("tmpi-dev-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(visible_gpus(dir.string(), ""), 0);
  // What every container on a GPU node may get, with or without a GPU of its own.
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia", "null"})
    std::ofstream(dir / name).put('x');
  EXPECT_EQ(visible_gpus(dir.string(), "all"), 0);
  std::ofstream(dir / "nvidia0").put('x');
  std::ofstream(dir / "nvidia3").put('x');
  EXPECT_EQ(visible_gpus(dir.string(), ""), 2);
  EXPECT_EQ(visible_gpus(dir.string(), "GPU-5c3f1a2e"), 2);
  EXPECT_EQ(visible_gpus(dir.string(), "void"), 0);  // no GPU meant, whatever /dev holds
  EXPECT_EQ(visible_gpus(dir.string(), "none"), 0);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(visible_gpus(dir.string(), ""), 0);  // no such folder
}

// An MPI program runs only under the MPI ABI it was built for.
TEST(FabricCheck, TheProgramFollowsTheMpiFlavour) {
  EXPECT_EQ(nccl_check_name(Flavour::kOpenMpi4), "nccl-check");
  EXPECT_EQ(nccl_check_name(Flavour::kOpenMpi5), "nccl-check");
  EXPECT_EQ(nccl_check_name(Flavour::kMpich), "nccl-check.mpich");
  EXPECT_EQ(nccl_check_name(Flavour::kIntel), "nccl-check.mpich");
  FabricOptions options;
  auto command = fabric_check_command(options, FabricBackend::kNccl, Flavour::kIntel);
  EXPECT_TRUE(command.at(0).ends_with("nccl-check.mpich")) << command.at(0);
  EXPECT_TRUE(fabric_check_command(options, FabricBackend::kNccl, Flavour::kOpenMpi5)
                  .at(0)
                  .ends_with("/nccl-check") ||
              fabric_check_command(options, FabricBackend::kNccl, Flavour::kOpenMpi5).at(0) == "nccl-check");
  options.program = "/opt/my-check";  // --nccl-check wins
  EXPECT_EQ(fabric_check_command(options, FabricBackend::kNccl, Flavour::kMpich).at(0), "/opt/my-check");
}

// An image without NCCL: 78, which the runtimes' failure policy does not restart on.
TEST(FabricCheck, NoNcclEndsWithTheCodeThatIsNotRestarted) {
  const std::string line =
      "no NCCL in this image for --check nccl: libnccl.so.2 not found: looked in LD_LIBRARY_PATH (unset)";
  auto out = read_fabric_check(
      "nccl-check report: {\"result\":\"fail\",\"backend\":\"nccl\",\"exit_code\":78,"
      "\"culprits\":[],\"failure\":\"" +
          line + "\"}\n",
      78, "launcher");
  EXPECT_EQ(out.exit, Exit::kConfig);
  ASSERT_EQ(out.rows.size(), 1U);
  EXPECT_EQ(out.rows[0].reason, line);
  ASSERT_NE(exit_info(78), nullptr);
  EXPECT_FALSE(exit_info(78)->retry);
  // No GPU stays the 69 of a host the job cannot use.
  auto no_gpu = read_fabric_check(
      "nccl-check report: {\"result\":\"fail\",\"backend\":\"nccl\",\"exit_code\":69,\"culprits\":[],"
      "\"failure\":\"no CUDA device is visible to rank 0 on n-0\"}\n",
      69, "launcher");
  EXPECT_EQ(no_gpu.exit, Exit::kUnavailable);
}

TEST(FabricCheck, CommandPassesTheLaunchersThresholds) {
  auto params =
      Params::parse(kScopeLauncher,
                    {"--max-bytes", "4M", "--min-busbw", "12.5", "--step-timeout", "9s", "--iters", "5"}, {});
  ASSERT_TRUE(params);
  FabricOptions options = launcher_options(*params).fabric;
  options.program = "/opt/nccl-check";
  auto command = fabric_check_command(options, FabricBackend::kNccl);
  std::string joined;
  for (const auto& word : command) joined += word + " ";
  EXPECT_EQ(joined.rfind("/opt/nccl-check --backend nccl --json - ", 0), 0U) << joined;
  EXPECT_NE(joined.find("--max-bytes 4M "), std::string::npos) << joined;
  EXPECT_NE(joined.find("--min-busbw 12.5 "), std::string::npos) << joined;
  EXPECT_NE(joined.find("--step-timeout 9s "), std::string::npos) << joined;
  EXPECT_NE(joined.find("--iters 5 "), std::string::npos) << joined;
  // What was not set stays nccl-check's own default, which may depend on the backend.
  EXPECT_EQ(joined.find("--warmup"), std::string::npos) << joined;
  EXPECT_EQ(joined.find("--min-bytes"), std::string::npos) << joined;
  auto from_env = Params::parse(kScopeLauncher, {}, {{"TMPI_PAIR_BYTES", "2M"}});
  ASSERT_TRUE(from_env);
  options = launcher_options(*from_env).fabric;
  options.program = "/opt/nccl-check";
  auto second = fabric_check_command(options, FabricBackend::kMpi);
  joined.clear();
  for (const auto& word : second) joined += word + " ";
  EXPECT_NE(joined.find("--pair-bytes 2M "), std::string::npos)
      << joined;  // a TMPI_ variable is a setting too
  EXPECT_EQ(joined.find("--max-bytes"), std::string::npos) << joined;
}

TEST(FabricCheck, PassKeepsTheTableAndTheReport) {
  auto out = read_fabric_check(
      "# nccl-check (mpi): 4 rank(s)\n# result: pass in 1.0 s\n"
      "nccl-check report: {\"result\":\"pass\",\"backend\":\"mpi\",\"culprits\":[]}\n",
      0, "launcher");
  EXPECT_TRUE(out.rows.empty());
  EXPECT_EQ(out.exit, Exit::kOk);
  EXPECT_EQ(out.report["backend"], "mpi");
  EXPECT_EQ(out.table, "# nccl-check (mpi): 4 rank(s)\n# result: pass in 1.0 s\n");
}

TEST(FabricCheck, CulpritsBecomeRowsWithExit4) {
  auto out = read_fabric_check(
      "nccl-check report: "
      "{\"result\":\"fail\",\"backend\":\"mpi\",\"culprits\":[{\"kind\":\"host\",\"name\":\"n-2\","
      "\"reason\":\"0.01 GB/s beside the good peer n-0\"}]}\n",
      4, "launcher");
  ASSERT_EQ(out.rows.size(), 1U);
  EXPECT_EQ(out.rows[0].host, "n-2");
  EXPECT_EQ(out.rows[0].check, "mpi host");
  EXPECT_EQ(out.exit, Exit::kUnavailable);
}

TEST(FabricCheck, AFinalizeThatHangsAfterTheVerdictNamesNoHostOfItsOwn) {
  const std::string verdict =
      "nccl-check report: "
      "{\"result\":\"fail\",\"backend\":\"mpi\",\"culprits\":[{\"kind\":\"host\",\"name\":\"n-2\","
      "\"reason\":\"0.005 GB/s beside the good peer n-0\"}]}\n";
  std::string gave_up;
  for (int rank = 0; rank < 3; ++rank)
    gave_up += fmt::format(
        "nccl-check timeout: {{\"rank\":{},\"host\":\"n-{}\",\"step\":\"MPI_Finalize\",\"after_seconds\":60,"
        "\"stood_still_seconds\":0,\"backend\":\"mpi\"}}\n",
        rank, rank);
  auto out = read_fabric_check(verdict + gave_up + "nccl-check report: {\"result\":\"timeout\"}\n", 69,
                               "launcher", {"n-0", "n-1", "n-2"});
  ASSERT_EQ(out.rows.size(), 1U) << "the verdict's culprit alone";
  EXPECT_EQ(out.rows[0].host, "n-2");
  EXPECT_EQ(out.exit, Exit::kUnavailable);

  // A rank that gave up in a measured step is still judged, finalize or not beside it.
  std::string measured = gave_up;
  measured.replace(measured.find("MPI_Finalize"), 12, "links round 1/3");
  auto judged = read_fabric_check(verdict + measured, 69, "launcher", {"n-0", "n-1", "n-2"});
  EXPECT_GT(judged.rows.size(), 1U);
}

TEST(FabricCheck, ATimeoutNamesTheSilentHostsWithExit3) {
  // Several ranks may time out and each print a report: the first one is read.
  std::string report =
      "{\"result\":\"timeout\",\"backend\":\"mpi\",\"culprits\":[],\"timeout\":{\"step\":\"links round 1/3\","
      "\"after_seconds\":5.0,\"rank\":0,\"host\":\"n-0\",\"silent_hosts\":[\"n-2\"]}}";
  auto out = read_fabric_check(
      "nccl-check report: " + report + "\nnccl-check report: {\"result\":\"timeout\"}\n", 3, "launcher");
  ASSERT_EQ(out.rows.size(), 1U);
  EXPECT_EQ(out.rows[0].host, "n-2");
  EXPECT_NE(out.rows[0].reason.find("links round 1/3 did not finish within 5 s"), std::string::npos)
      << out.rows[0].reason;
  EXPECT_EQ(out.exit, Exit::kTempFail);
}

TEST(FabricCheck, SilentRanksAreNamedByTheirPlacedHost) {
  // A stop during init: nccl-check never learnt which host ranks 4 and 5 are on.
  std::string report =
      "{\"result\":\"timeout\",\"backend\":\"mpi\",\"culprits\":[],\"timeout\":{\"step\":\"init\","
      "\"after_seconds\":5.0,\"rank\":2,\"host\":\"n-1\",\"silent_hosts\":[\"rank 4\",\"rank 5\"],"
      "\"silent_ranks\":[4,5,9]}}";
  std::vector<std::string> placement = {"n-0.job", "n-0.job", "n-1.job", "n-1.job", "n-2.job", "n-2.job"};
  auto out = read_fabric_check("nccl-check report: " + report + "\n", 3, "launcher", placement);
  ASSERT_EQ(out.rows.size(), 2U);
  EXPECT_EQ(out.rows[0].host, "n-2");  // one row for both of its ranks, by its short name
  EXPECT_NE(out.rows[0].reason.find("this host does not answer"), std::string::npos) << out.rows[0].reason;
  EXPECT_EQ(out.rows[1].host, "rank 9");  // outside the placement: left as nccl-check said
  // Without a placement, nccl-check's own names stand.
  auto bare = read_fabric_check("nccl-check report: " + report + "\n", 3, "launcher");
  ASSERT_EQ(bare.rows.size(), 2U);
  EXPECT_EQ(bare.rows[0].host, "rank 4");
}

TEST(FabricCheck, RanksThatNeverGaveUpInABlockingCallAreTheSilentOnes) {
  // Node 2 stopped before its ranks passed MPI_Init: the other ranks gave up there, each on
  // a line of its own (ncclcheck/main.cpp, give_up), and rank 0 published a timeout that
  // names nobody; ranks 4 and 5 said nothing.
  std::string output;
  for (int rank : {1, 3, 0, 2}) {
    output += "nccl-check: rank " + std::to_string(rank) + " on n-" + std::to_string(rank / 2) +
              ": MPI_Init did not finish within 10 s; giving up (exit 75)\n";
    output += "nccl-check timeout: {\"rank\":" + std::to_string(rank) + ",\"host\":\"n-" +
              std::to_string(rank / 2) +
              "\",\"step\":\"MPI_Init\",\"after_seconds\":10.0,\"backend\":\"mpi\"}\n";
  }
  output +=
      "nccl-check report: {\"result\":\"timeout\",\"backend\":\"mpi\",\"timeout\":{\"step\":\"MPI_Init\","
      "\"after_seconds\":10.0,\"rank\":0,\"host\":\"n-0\",\"silent_hosts\":[],\"silent_ranks\":[]}}\n";
  std::vector<std::string> placement = {"n-0.job", "n-0.job", "n-1.job", "n-1.job", "n-2.job", "n-2.job"};
  auto out = read_fabric_check(output, 75, "launcher", placement);
  EXPECT_EQ(out.exit, Exit::kTempFail);
  ASSERT_EQ(out.rows.size(), 1U);
  EXPECT_EQ(out.rows[0].host, "n-2");
  EXPECT_EQ(out.rows[0].check, "mpi timeout");
  EXPECT_NE(out.rows[0].reason.find("MPI_Init did not finish within 10 s"), std::string::npos)
      << out.rows[0].reason;
  EXPECT_NE(out.rows[0].reason.find("this host does not answer"), std::string::npos) << out.rows[0].reason;
  EXPECT_EQ(out.table.find("nccl-check timeout: "), std::string::npos)
      << "the machine lines stay out of the table";

  // Rank 0 itself silent: no report at all, and the lines of the others still name the host.
  std::string without_rank0;
  for (int rank : {2, 3, 4, 5}) {
    // Rank 5's line comes after another stream's text without its line break.
    without_rank0 +=
        std::string(rank == 5 ? "a partial line" : "") +
        "nccl-check timeout: {\"rank\":" + std::to_string(rank) +
        ",\"host\":\"n\",\"step\":\"init (MPI_Comm_split)\",\"after_seconds\":10,\"backend\":\"mpi\"}\n";
  }
  auto silent0 = read_fabric_check(without_rank0 + "garbage\nnccl-check timeout: {\"rank\":\"x\"}\n", 75,
                                   "launcher", placement);
  EXPECT_EQ(silent0.exit, Exit::kTempFail);
  ASSERT_EQ(silent0.rows.size(), 1U);
  EXPECT_EQ(silent0.rows[0].host, "n-0");
  EXPECT_NE(silent0.rows[0].reason.find("init (MPI_Comm_split)"), std::string::npos)
      << silent0.rows[0].reason;
  EXPECT_NE(silent0.table.find("a partial line\n"), std::string::npos) << silent0.table;
}

// Node 2 stopped inside init: when mpirun aborts, Open MPI sends its ranks SIGCONT before
// SIGTERM, and their watchdogs, long due, fire at once, so every rank says it gave up. Node
// 2's ranks say they stood still (ncclcheck/watchdog.h): they are the silent ones, not the
// host of rank 0, which noticed first. With every rank alive, nothing is named alone.
TEST(FabricCheck, RanksThatStoodStillAreSilentAndAllAliveIsNotLocalised) {
  auto gave_up = [](const std::vector<double>& stood_still) {
    std::string output;
    for (int rank = 0; rank < 6; ++rank) {
      output += "nccl-check timeout: {\"rank\":" + std::to_string(rank) + ",\"host\":\"n-" +
                std::to_string(rank / 2) +
                "\",\"step\":\"init (MPI_Comm_dup)\",\"after_seconds\":10.0,\"stood_still_seconds\":" +
                std::to_string(stood_still[static_cast<std::size_t>(rank)]) + ",\"backend\":\"mpi\"}\n";
    }
    return output +
           "nccl-check report: {\"result\":\"timeout\",\"backend\":\"mpi\",\"timeout\":{\"step\":"
           "\"init (MPI_Comm_dup)\",\"after_seconds\":10.0,\"rank\":0,\"host\":\"n-0\"}}\n";
  };
  std::vector<std::string> placement = {"n-0.job", "n-0.job", "n-1.job", "n-1.job", "n-2.job", "n-2.job"};
  auto stopped = read_fabric_check(gave_up({0.2, 0.2, 0.4, 0.2, 9.6, 9.7}), 75, "launcher", placement);
  EXPECT_EQ(stopped.exit, Exit::kTempFail);
  ASSERT_EQ(stopped.rows.size(), 1U);
  EXPECT_EQ(stopped.rows[0].host, "n-2");
  EXPECT_NE(stopped.rows[0].reason.find("this host does not answer"), std::string::npos)
      << stopped.rows[0].reason;

  auto alive = read_fabric_check(gave_up({0.2, 0.2, 0.4, 0.2, 0.3, 0.2}), 75, "launcher", placement);
  EXPECT_EQ(alive.exit, Exit::kUnavailable);
  ASSERT_EQ(alive.rows.size(), 3U);
  for (const auto& row : alive.rows) {
    EXPECT_EQ(row.check, "mpi not localised") << row.host;
    EXPECT_NE(row.reason.find("any of n-0, n-1, n-2 could be"), std::string::npos) << row.reason;
  }
}

TEST(FabricCheck, AReportAfterAnotherStreamsTextOnItsLineIsRead) {
  // mpirun forwards each stream of each rank in chunks: another stream's text without its
  // line break can come before the report on the same line.
  auto out = read_fabric_check(
      "# result: fail in 2.0 s\nWarning: a partial lnccl-check report: "
      "{\"result\":\"fail\",\"backend\":\"mpi\",\"culprits\":[{\"kind\":\"host\",\"name\":\"n-2\","
      "\"reason\":\"slow\"}]}\n",
      69, "launcher");
  ASSERT_EQ(out.rows.size(), 1U);
  EXPECT_EQ(out.rows[0].host, "n-2");
  EXPECT_EQ(out.table, "# result: fail in 2.0 s\nWarning: a partial l\n");
}

TEST(FabricCheck, AReportOfTheWrongShapeIsReadWithoutThrowing) {
  // Every field of the wrong type: the reader keeps what it can and never throws.
  for (
      const char* body :
      {R"({"result":1,"backend":[],"culprits":[1,{"name":2,"kind":null}],"failure":{},"timeout":[]})",
       R"({"culprits":{},"timeout":{"step":3,"after_seconds":"x","rank":"y","silent_ranks":["a",1.5],"silent_hosts":[1,"n-1"]}})",
       R"({"timeout":{"silent_ranks":[-1,99]}})"}) {
    FabricCheck out;
    EXPECT_NO_THROW(out =
                        read_fabric_check(std::string("nccl-check report: ") + body + "\n", 69, "l", {"a.x"}))
        << body;
    EXPECT_FALSE(out.rows.empty()) << body;
    EXPECT_NE(out.exit, Exit::kOk) << body;
  }
}

TEST(FabricCheck, NoReportIsAFailureThatShowsTheOutput) {
  auto out = read_fabric_check("mpirun was unable to launch the specified application\n", 1, "launcher");
  ASSERT_EQ(out.rows.size(), 1U);
  EXPECT_EQ(out.rows[0].host, "launcher");
  EXPECT_NE(out.rows[0].reason.find("exited with status 1 and no report: mpirun was unable"),
            std::string::npos);
  EXPECT_EQ(out.exit, Exit::kUnavailable);
  // A passing report with a failed exit status is not a pass.
  EXPECT_FALSE(read_fabric_check("nccl-check report: {\"result\":\"pass\"}\n", 1, "l").rows.empty());
}

// The report comes from mpirun's output: fields of other shapes read as absent, never as an
// exception (which ended the launcher with 70 and no report.json).
TEST(FabricCheck, TheStatusReadsAReportOfAnyShapeWithoutThrowing) {
  StatusFeed feed({StatusMode::kOff, Millis(0)}, 2, 4);
  auto report = nlohmann::json::parse(
      R"({"allreduce": [1, {"busbw_gbps": "x"}, {"busbw_gbps": 3.5}, null],
          "culprits": [{"kind": 3}, "x", {"kind": "host", "name": "node-2"}]})");
  EXPECT_NO_THROW(feed.fabric(report));
  ASSERT_TRUE(feed.health().busbw_gbps.has_value());
  EXPECT_DOUBLE_EQ(*feed.health().busbw_gbps, 3.5);
  EXPECT_EQ(feed.health().slowest_host, "node-2");
  for (const char* odd :
       {R"({"allreduce": {"a": 1}, "culprits": 7})", R"({"allreduce": "x", "culprits": [[1]]})"}) {
    StatusFeed other({StatusMode::kOff, Millis(0)}, 2, 4);
    EXPECT_NO_THROW(other.fabric(nlohmann::json::parse(odd))) << odd;
    EXPECT_FALSE(other.health().busbw_gbps.has_value()) << odd;
    EXPECT_EQ(other.health().slowest_host, "") << odd;
  }
}

}  // namespace
}  // namespace tmpi::launch

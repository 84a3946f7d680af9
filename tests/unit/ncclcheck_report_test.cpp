// nccl-check's report and its judgement of hosts, without MPI: the JSON the launcher reads
// and the table a person reads, a timeout's silent hosts, GPU links by device, and hosts
// whose ranks share CPUs (pods of one machine), which are shown but not judged.
#include <set>

#include <gtest/gtest.h>

#include "ncclcheck/cpus.h"
#include "ncclcheck/metrics.h"
#include "ncclcheck/report.h"
#include "ncclcheck/verdict.h"

namespace tmpi::check {
namespace {

Report sample_report() {
  Report report;
  report.backend = Backend::kMpi;
  report.library = "Open MPI v4.1.4";
  report.ranks = 6;
  report.hosts = {{"node-0", {0, 1}, nlohmann::json::array()},
                  {"node-1", {2, 3}, nlohmann::json::array()},
                  {"node-2", {4, 5}, nlohmann::json::array()}};
  report.allreduce = {{1 << 20, 0.001, 1.048576, 1.747627, 0}, {1 << 22, 0.004, 1.048576, 1.747627, 0}};
  report.pair_bytes = 1 << 20;
  report.links = {{{0, 1}, 2.0, 0}, {{0, 2}, 0.01, 0}, {{1, 2}, 0.01, 0}};
  report.link_floor = 1.0;
  return report;
}

TEST(Report, JsonHasTheShapeTheLauncherReads) {
  Report report = sample_report();
  report.culprits = {{"host", "node-2", "slow"}};
  auto json = to_json(report);
  EXPECT_EQ(json["result"], "fail");
  EXPECT_EQ(json["exit_code"], 69);
  EXPECT_EQ(json["allreduce"].size(), 2U);
  EXPECT_EQ(json["allreduce"][1]["bytes"], 1 << 22);
  EXPECT_DOUBLE_EQ(json["allreduce"][0]["busbw_gbps"].get<double>(), 1.747627);
  EXPECT_EQ(json["links"][1]["hosts"], nlohmann::json::array({"node-0", "node-2"}));
  EXPECT_EQ(json["culprits"][0]["name"], "node-2");
  EXPECT_EQ(json["hosts"][2]["ranks"], nlohmann::json::array({4, 5}));
  EXPECT_FALSE(json.contains("timeout"));
}

TEST(Report, TimeoutWinsAndNamesTheSilentHosts) {
  Report report = sample_report();
  report.timeout = Timeout{"links round 2/3", 5, 0, "node-0", {"node-2"}, {4, 5}};
  EXPECT_EQ(report.exit_code(), 75);
  auto json = to_json(report);
  EXPECT_EQ(json["result"], "timeout");
  EXPECT_EQ(json["timeout"]["silent_hosts"], nlohmann::json::array({"node-2"}));
  EXPECT_EQ(json["timeout"]["silent_ranks"], nlohmann::json::array({4, 5}));
  EXPECT_NE(render_table(report).find(
                "TIMEOUT in links round 2/3 after 5.0 s (seen by rank 0 on node-0); no answer from node-2"),
            std::string::npos);
}

TEST(Report, GpuLinksAreNamedByDevice) {
  Report report = sample_report();
  report.hosts[1].devices = nlohmann::json::array(
      {{{"device", 0}, {"pci_bus_id", "0000:19:00.0"}}, {{"device", 1}, {"pci_bus_id", "0000:3b:00.0"}}});
  report.gpu_links = {{1, {{0, 1}, 0.5, 0}}};
  report.gpu_floor = 100;
  EXPECT_EQ(report.gpu_name(1, 1), "node-1 GPU 1 (0000:3b:00.0)");
  EXPECT_EQ(report.gpu_name(0, 1), "node-0 rank 1");  // the MPI backend knows no device
  EXPECT_NE(render_table(report).find("# gpu link node-1 GPU 0 (0000:19:00.0) <-> node-1 GPU 1 "
                                      "(0000:3b:00.0): 0.500 GB/s  #wrong 0  SLOW"),
            std::string::npos)
      << render_table(report);
  auto json = to_json(report);
  EXPECT_EQ(json["gpu_links"][0]["host"], "node-1");
  EXPECT_EQ(json["gpu_links"][0]["local_ranks"], nlohmann::json::array({0, 1}));
}

TEST(Report, TableReadsLikeNcclTests) {
  Report report = sample_report();
  std::string table = render_table(report);
  EXPECT_NE(table.find("size     time(us)      algbw      busbw   #wrong"), std::string::npos) << table;
  EXPECT_NE(table.find("        1048576       1000.0       1.05       1.75        0"), std::string::npos)
      << table;
  EXPECT_NE(table.find("# link node-0 <-> node-2: 0.010 GB/s  #wrong 0  SLOW"), std::string::npos) << table;
  EXPECT_NE(table.find("# result: pass"), std::string::npos);
  EXPECT_EQ(report.exit_code(), 0);
  EXPECT_EQ(human_bytes(256 << 20), "256 MiB");
  EXPECT_EQ(human_bytes(1000), "1000 B");
}

TEST(Cpus, ListsRoundTripAndHostileTextIsSkipped) {
  EXPECT_EQ(cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list({}), "");
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  // Malformed parts, reversed ranges and numbers beyond any kernel are skipped, not trusted.
  EXPECT_EQ(parse_cpu_list("x,3-1,-2,5-,7,99999999999,65536,\xff,2-2"), (std::set<int>{2, 7}));
  EXPECT_EQ(parse_cpu_list("0-65535").size(), static_cast<std::size_t>(kMaxCpu));
  std::set<int> own = parse_cpu_list(own_cpu_list());
  EXPECT_FALSE(own.empty()) << "this process runs on some CPU";
  EXPECT_EQ(cpu_list(own), own_cpu_list());
  EXPECT_TRUE(ranks_share_cpus(4, 2));
  EXPECT_FALSE(ranks_share_cpus(2, 2));
  EXPECT_FALSE(ranks_share_cpus(4, 0));  // unknown: judged as usual
}

// Pods of one job on one machine take turns on its CPUs, however few ranks each pod has: two
// pods of 2 ranks on a 2-core node share, the same pods on two nodes do not. The boot id says
// which machine a rank is on; a missing or hostile one makes the host a machine of its own.
TEST(Cpus, RanksOfPodsOnOneMachineShareItsCpus) {
  const std::string node_a = "0a1b2c3d-0000-4000-8000-00000000000a";
  const std::string node_b = "0a1b2c3d-0000-4000-8000-00000000000b";
  EXPECT_EQ(parse_affinity(node_a + " 0-1").machine, node_a);
  EXPECT_EQ(parse_affinity(node_a + " 0-1").cpus, (std::set<int>{0, 1}));
  EXPECT_EQ(parse_affinity("0-3").cpus.size(), 4U);  // no machine said
  EXPECT_EQ(parse_affinity("../../etc 0-1").machine, "");
  EXPECT_EQ(parse_affinity(std::string(node_a).replace(8, 1, "x") + " 0").machine, "");
  EXPECT_EQ(parse_affinity("0A1B2C3D-0000-4000-8000-00000000000A 0").machine,
            "");  // the kernel writes lower case
  std::string own = own_machine_id();
  EXPECT_EQ(own.size(), 36U) << "this kernel says its boot id";
  EXPECT_EQ(parse_affinity(own_affinity_text()).machine, own);

  auto ranks = [](const std::string& machine, int count) {
    return std::vector<Affinity>(static_cast<std::size_t>(count), Affinity{machine, {0, 1}});
  };
  auto one_machine = cpu_shares({ranks(node_a, 2), ranks(node_a, 2)});
  ASSERT_EQ(one_machine.size(), 2U);
  for (const auto& share : one_machine) {
    EXPECT_TRUE(share.shared);
    EXPECT_EQ(share.ranks, 4U);
    EXPECT_EQ(share.cpus, 2U);
    EXPECT_EQ(share.hosts, 2U);
  }
  auto two_machines = cpu_shares({ranks(node_a, 2), ranks(node_b, 2)});
  EXPECT_FALSE(two_machines[0].shared);
  EXPECT_FALSE(two_machines[1].shared);
  EXPECT_EQ(two_machines[1].hosts, 1U);
  // Unknown machines are never merged: each such host is judged by its own ranks only.
  auto unknown = cpu_shares({ranks("", 2), ranks("", 2), ranks(node_a, 3)});
  EXPECT_FALSE(unknown[0].shared);
  EXPECT_EQ(unknown[1].ranks, 2U);
  EXPECT_TRUE(unknown[2].shared);  // 3 ranks on 2 CPUs, alone
  // Ranks of one host that disagree on their machine: the host stands alone.
  auto split = cpu_shares({{Affinity{node_a, {0, 1}}, Affinity{node_b, {0, 1}}}, ranks(node_a, 2)});
  EXPECT_FALSE(split[0].shared);
  EXPECT_EQ(split[1].hosts, 1U);
}

TEST(Report, AHostWhoseRanksShareCpusIsShownNotJudged) {
  Report report = sample_report();
  report.backend = Backend::kMpi;
  report.hosts[1].cpus = 1;
  report.hosts[1].shares_cpus = true;
  report.gpu_links = {{1, {{0, 1}, 0.5, 0}}};
  report.gpu_floor = 100;
  std::string table = render_table(report);
  EXPECT_NE(
      table.find(
          "# host node-1: 2 ranks share 1 CPU(s): bandwidth within it is the scheduler's, shown, not judged"),
      std::string::npos)
      << table;
  report.hosts[2].cpus = 2;
  report.hosts[2].machine_ranks = 6;
  report.hosts[2].machine_hosts = 3;
  report.hosts[2].shares_cpus = true;
  table = render_table(report);
  EXPECT_NE(
      table.find("# host node-2: 6 ranks share 2 CPU(s) (its machine's, with 2 other host(s)): bandwidth"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("# gpu link node-1 rank 0 <-> node-1 rank 1: 0.500 GB/s  #wrong 0\n"),
            std::string::npos)
      << table;
  auto json = to_json(report);
  EXPECT_EQ(json["hosts"][1]["bandwidth_judged"], false);
  EXPECT_EQ(json["hosts"][1]["cpus"], 1);
  EXPECT_EQ(json["hosts"][2]["machine_hosts"], 3);
  EXPECT_EQ(json["hosts"][2]["machine_ranks"], 6);
  EXPECT_EQ(json["hosts"][0]["bandwidth_judged"], true);
  // Its data is still judged: no scheduler excuses a wrong element.
  std::vector<std::string> gpus = {"n rank 0", "n rank 1", "n rank 2"};
  EXPECT_TRUE(judge_gpu_data({{{0, 1}, 0.1, 0}, {{1, 2}, 0.1, 0}}, gpus).empty());
  auto wrong = judge_gpu_data({{{0, 1}, 9, 0}, {{1, 2}, 9, 3}}, gpus);
  ASSERT_EQ(wrong.size(), 1U);
  EXPECT_EQ(wrong[0].name, "n rank 1 <-> n rank 2");
  EXPECT_EQ(wrong[0].reason, "3 wrong elements");
}

// The verdict over a whole report: each kind of sample reaches its judge, and the GPU floor
// leaves out a host whose ranks share CPUs (its 0.1 GB/s would halve the floor to 5).
TEST(Verdict, EachKindOfSampleIsJudgedAndSharedCpusStayOutOfTheGpuFloor) {
  Report report = sample_report();
  report.links = {{{0, 1}, 2.0, 0}, {{0, 2}, 2.0, 0}, {{1, 2}, 2.0, 0}};
  report.allreduce[0].wrong = 3;
  report.hosts[1].shares_cpus = true;
  report.nodes = {{0, 10.0, 0}, {1, 0.1, 2}, {2, 10.0, 0}};
  report.gpu_links = {{0, {{0, 1}, 50.0, 0}}, {1, {{0, 1}, 0.1, 0}}, {2, {{0, 1}, 10.0, 0}}};
  judge(report, Threshold{0, 0.5});
  EXPECT_DOUBLE_EQ(report.gpu_floor, 15.0);  // half the median of 50, 50, 10, 10
  std::vector<std::string> seen;
  for (const auto& culprit : report.culprits)
    seen.push_back(culprit.kind + ": " + culprit.name + ": " + culprit.reason);
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "data: world: all-reduce of 1 MiB: 3 wrong elements over 6 ranks",
                      "node: node-1: intra-node all-reduce: 2 wrong elements",
                      "gpu link: node-2 rank 0 <-> node-2 rank 1: 10 GB/s, below the floor of 15 GB/s",
                  }));
}

TEST(Verdict, TheWorldAgainstMinBusbwOnlyWithPeers) {
  Report report = sample_report();
  report.links.clear();
  judge(report, Threshold{100, 0.5});
  ASSERT_EQ(report.culprits.size(), 1U);
  EXPECT_EQ(report.culprits[0].reason, "all-reduce of 4 MiB: busbw 1.75 GB/s, below --min-busbw 100");
  report.culprits.clear();
  report.ranks = 1;  // one rank moves nothing: its busbw of 0 says nothing of a fabric
  judge(report, Threshold{100, 0.5});
  EXPECT_TRUE(report.culprits.empty());
  report.allreduce.clear();  // a report that never measured: nothing to judge, and no crash
  report.ranks = 6;
  judge(report, Threshold{100, 0.5});
  EXPECT_TRUE(report.culprits.empty());
}

}  // namespace
}  // namespace tmpi::check

// The rank agent's own placement check (agent/placement.h): where the layout puts a
// rank, when an agent counts itself misplaced, and that a misplaced agent never starts its
// rank but exits 69.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/contract.h"
#include "agent/placement.h"

namespace tmpi::launch {
namespace {

TEST(RankPlacement, TheLayoutFillsEachHostsSlotsInTurn) {
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(layout_host(rank, "2x2"), rank / 2) << rank;
  EXPECT_EQ(layout_host(4, "2x2"), 0) << "more ranks than slots: round after round";
  // 8 slots on one host, then 4 on each of two.
  EXPECT_EQ(layout_host(7, "8x1,4x2"), 0);
  EXPECT_EQ(layout_host(8, "8x1,4x2"), 1);
  EXPECT_EQ(layout_host(12, "8x1,4x2"), 2);
  EXPECT_EQ(layout_host(15, "8x1,4x2"), 2);
  EXPECT_EQ(layout_host(0, ""), -1);
  EXPECT_EQ(layout_host(0, "axb,0x3"), -1) << "no slot: nothing to say";
  EXPECT_EQ(layout_host(-1, "2x2"), -1);
  EXPECT_EQ(layout_host(3, "2x1,junk,2x1"), 1) << "a run that does not parse is skipped";
}

TEST(RankPlacement, AnAgentOnAnotherHostThanItsRanksIsMisplaced) {
  std::map<std::string, std::string> env = {
      {"TMPI_SLOT_LAYOUT", "2x2"},
      {std::string(contract::kRankHosts), join_hosts({"j-node-0-0.j", "j-node-0-1.j"})}};
  EXPECT_EQ(env[std::string(contract::kRankHosts)], "j-node-0-0.j,j-node-0-1.j");
  EXPECT_FALSE(misplaced(1, env, "j-node-0-0")) << "the pod's short name matches the FQDN";
  EXPECT_FALSE(misplaced(2, env, "j-node-0-1.j"));
  auto wrong = misplaced(2, env, "j-launcher-0-0");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->expected, "j-node-0-1.j");
  EXPECT_EQ(wrong->actual, "j-launcher-0-0");
  EXPECT_TRUE(misplaced(0, env, "j-node-0-1")) << "rank 0 belongs on the first host";
  EXPECT_FALSE(misplaced(0, env, "j-node-0-0.other")) << "short names are compared";
}

TEST(RankPlacement, WithoutTheLayoutOrTheHostsNothingIsJudged) {
  EXPECT_FALSE(misplaced(2, {{"TMPI_SLOT_LAYOUT", "2x2"}}, "elsewhere"));
  EXPECT_FALSE(misplaced(2, {{std::string(contract::kRankHosts), "a,b"}}, "elsewhere"));
  EXPECT_FALSE(
      misplaced(2, {{"TMPI_SLOT_LAYOUT", "2x2"}, {std::string(contract::kRankHosts), "a"}}, "elsewhere"))
      << "a list shorter than the layout";
  EXPECT_FALSE(
      misplaced(0, {{"TMPI_SLOT_LAYOUT", "2x2"}, {std::string(contract::kRankHosts), ",b"}}, "elsewhere"))
      << "an empty name";
  EXPECT_FALSE(misplaced(0, {{"TMPI_SLOT_LAYOUT", "2x2"}, {std::string(contract::kRankHosts), "a,b"}}, ""));
}

TEST(RankPlacement, AMisplacedAgentExits69AndNeverStartsItsRank) {
  auto marker = std::filesystem::temp_directory_path() / ("tmpi-misplaced-" + std::to_string(getpid()));
  std::filesystem::remove(marker);
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  std::string here(name);
  std::map<std::string, std::string> env = {{"OMPI_COMM_WORLD_RANK", "1"},
                                            {"OMPI_COMM_WORLD_SIZE", "2"},
                                            {"TMPI_SLOT_LAYOUT", "1x2"},
                                            {std::string(contract::kRankHosts), here + ",not-" + here}};
  RankAgentOptions options;  // no coordinator: nothing to report to
  EXPECT_EQ(run_rank(options, env, {"touch", marker.string()}), 69);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the rank was started";
  env["OMPI_COMM_WORLD_RANK"] = "0";
  EXPECT_EQ(run_rank(options, env, {"touch", marker.string()}), 0) << "rank 0 is in place";
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

}  // namespace
}  // namespace tmpi::launch

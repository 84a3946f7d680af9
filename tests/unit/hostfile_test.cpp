// Topology from the files a user or Trainer writes, not from the API: hostfiles in both
// dialects (Open MPI's `slots=`, MPICH's `host:n`), comments and roles, a launcher that runs
// ranks (first, as mpirun maps it), errors that name the line; the static spec; and the
// hostfiles written in either dialect.
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "common/topology.h"
#include "initcontainer/sources.h"

namespace tmpi::init {
namespace {

std::vector<std::string> host_names(const Topology& topology) {
  std::vector<std::string> out;
  for (const auto& host : topology.hosts) out.push_back(host.name);
  return out;
}

TEST(Hostfile, BothDialectsCommentsAndRoles) {
  SourceOptions options;
  options.jobset = "job";
  auto t = topology_from_hostfile(
      "# Trainer's hostfile\njob-launcher-0-0.job slots=1\njob-node-0-0.job slots=4 max_slots=4\n"
      "  job-node-0-1.job:2   # hydra form\nplainhost\n",
      "/etc/mpi/hostfile", options);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(host_names(*t), (std::vector<std::string>{"job-node-0-0.job", "job-node-0-1.job", "plainhost"}));
  EXPECT_EQ(t->hosts[0].slots, 4);
  EXPECT_EQ(t->hosts[1].slots, 2);
  EXPECT_EQ(t->hosts[1].group, "node");
  EXPECT_EQ(t->hosts[1].pod_index, 1);
  EXPECT_EQ(t->hosts[2].slots, 1);
  ASSERT_TRUE(t->launcher);
  EXPECT_EQ(t->subdomain, "job");
}

// runLauncherAsNode: Trainer's hostfile lists the launcher too, and it is a host. Without
// that line the runtime and the flag disagree: an error, not a job on the node pods alone.
TEST(Hostfile, LauncherAsNodeNeedsTheLaunchersLine) {
  SourceOptions options;
  options.jobset = "job";
  options.launcher_as_node = true;
  auto t = topology_from_hostfile("job-launcher-0-0.job slots=2\njob-node-0-0.job slots=2\n", "hf", options);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(host_names(*t), (std::vector<std::string>{"job-launcher-0-0.job", "job-node-0-0.job"}));
  auto missing = topology_from_hostfile("job-node-0-0.job slots=2\n", "hf", options);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().exit, Exit::kData);
  EXPECT_NE(missing.error().message.find("no line names the launcher (job-launcher-0-0)"), std::string::npos)
      << missing.error().message;
  EXPECT_NE(missing.error().message.find("runLauncherAsNode: true"), std::string::npos);
}

TEST(Hostfile, LauncherAsNodeComesFirstAsMpirunMapsIt) {
  // Trainer v2.3 lists the node pods first and the launcher last; mpirun maps its own host first.
  SourceOptions options;
  options.jobset = "job";
  options.launcher_as_node = true;
  auto t = topology_from_hostfile(
      "job-node-0-0.job slots=2\njob-node-0-1.job slots=2\njob-launcher-0-0.job slots=2\n",
      "/etc/mpi/hostfile", options);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(host_names(*t),
            (std::vector<std::string>{"job-launcher-0-0.job", "job-node-0-0.job", "job-node-0-1.job"}));
  EXPECT_EQ(t->hosts[0].role, PodRole::kLauncher);
}

TEST(Hostfile, ErrorsNameTheLine) {
  auto dup = topology_from_hostfile("a slots=1\nb slots=1\na slots=2\n", "hf", {});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("hf line 3"), std::string::npos) << dup.error().message;
  EXPECT_NE(dup.error().message.find("line 1"), std::string::npos);
  for (const char* bad :
       {"a slots=0\n", "a slots=-2\n", "a:0\n", "a slots=x\n", "a foo\n", "a color=red\n"}) {
    auto t = topology_from_hostfile(bad, "hf", {});
    ASSERT_FALSE(t) << bad;
    EXPECT_EQ(t.error().exit, Exit::kData);
    EXPECT_NE(t.error().message.find("hf line 1"), std::string::npos) << t.error().message;
  }
  EXPECT_FALSE(topology_from_hostfile("# only a comment\n", "hf", {}));
}

TEST(Static, TrainerNames) {
  SourceOptions options;
  options.jobset = "train";
  options.slots = 8;
  auto t = topology_from_static({"launcher=1", "node=2x2"}, options);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(host_names(*t), (std::vector<std::string>{"train-node-0-0.train", "train-node-0-1.train",
                                                      "train-node-1-0.train", "train-node-1-1.train"}));
  EXPECT_EQ(t->launcher->name, "train-launcher-0-0.train");
  EXPECT_EQ(t->total_slots(), 32);
  EXPECT_FALSE(topology_from_static({"node"}, options));
  EXPECT_FALSE(topology_from_static({"node=0"}, options));
  EXPECT_FALSE(topology_from_static({"node=2"}, SourceOptions{}));  // no jobset
}

TEST(Render, DialectsAndDeepSpeedRule) {
  SourceOptions options;
  options.jobset = "j";
  auto t = topology_from_static({"node=2"}, options);
  ASSERT_TRUE(t);
  EXPECT_EQ(render_hostfile(*t, Dialect::kOpenMpi), "j-node-0-0.j slots=1\nj-node-0-1.j slots=1\n");
  EXPECT_EQ(render_hostfile(*t, Dialect::kHydra), "j-node-0-0.j:1\nj-node-0-1.j:1\n");
  std::regex deepspeed(R"(^(\S+)\s+slots=(\d+)$)");
  std::string ds = render_hostfile(*t, Dialect::kDeepSpeed);
  std::istringstream lines(ds);
  int matched = 0;
  for (std::string line; std::getline(lines, line);) matched += std::regex_match(line, deepspeed) ? 1 : 0;
  EXPECT_EQ(matched, 2);
  EXPECT_NE(render_discover_hosts(*t).find("echo 'j-node-0-1.j:1'"), std::string::npos);
}

}  // namespace
}  // namespace tmpi::init

// mpi-launcher's pure parts: the command for every MPI (Intel's from its documented hydra
// flags, since it cannot be installed here), flavour detection, environment forwarding,
// the rank variables and NODE_RANK, failure attribution, the options read from the
// parameters, and report.json's rank record. The preflight's checks: preflight_test.cpp;
// child processes and mpirun's strays: process_test.cpp.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "launcher/failure.h"
#include "launcher/mpi_command.h"
#include "launcher/options.h"

namespace tmpi::launch {
namespace {

LaunchPlan plan(Flavour flavour) {
  LaunchPlan p;
  p.flavour = flavour;
  p.launcher = flavour == Flavour::kMpich || flavour == Flavour::kIntel ? "mpiexec.hydra" : "mpirun";
  p.hostfile = "/etc/mpi/hostfile";
  p.np = 16;
  p.ssh_wrapper = "/tmp/tmpi-ssh";
  p.ssh_options = {"-p", "2222", "-i", "/k"};
  p.iface = "eth0";
  p.env_names = {"NCCL_DEBUG", "TMPI_COORDINATOR"};
  p.command = {"mpi-launcher", "rank", "--", "python", "train.py"};
  return p;
}

TEST(MpiCommand, OpenMpi4PassesEverythingOnTheCommandLine) {
  auto p = plan(Flavour::kOpenMpi4);
  p.as_root = true;
  EXPECT_EQ(
      shell_join(build_command(p)),
      "mpirun --hostfile /etc/mpi/hostfile -np 16 --mca plm_rsh_agent ssh --mca plm_rsh_args '-p 2222 -i /k' "
      "--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --allow-run-as-root -x NCCL_DEBUG "
      "-x TMPI_COORDINATOR mpi-launcher rank -- python train.py");
}

TEST(MpiCommand, OpenMpi5UsesPrrteParameters) {
  std::string line = shell_join(build_command(plan(Flavour::kOpenMpi5)));
  EXPECT_NE(line.find("--prtemca plm_ssh_agent ssh --prtemca plm_ssh_args '-p 2222 -i /k'"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("--prtemca oob_tcp_if_include eth0"), std::string::npos);
  EXPECT_EQ(line.find("orte"), std::string::npos) << "Open MPI 5 ignores ORTE parameters";
}

TEST(MpiCommand, MpichAndIntelHydra) {
  EXPECT_EQ(
      shell_join(build_command(plan(Flavour::kMpich))),
      "mpiexec.hydra -f /etc/mpi/hostfile -np 16 -launcher ssh -launcher-exec /tmp/tmpi-ssh -iface eth0 "
      "-genvlist NCCL_DEBUG,TMPI_COORDINATOR mpi-launcher rank -- python train.py");
  EXPECT_EQ(
      shell_join(build_command(plan(Flavour::kIntel))),
      "mpiexec.hydra -f /etc/mpi/hostfile -n 16 -bootstrap ssh -bootstrap-exec /tmp/tmpi-ssh -iface eth0 "
      "-genvlist NCCL_DEBUG,TMPI_COORDINATOR mpi-launcher rank -- python train.py");
}

TEST(MpiCommand, DetectsTheFlavourFromVersionText) {
  EXPECT_EQ(
      *detect_flavour("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/"),
      Flavour::kOpenMpi4);
  EXPECT_EQ(*detect_flavour("mpirun (Open MPI) 5.0.7\n"), Flavour::kOpenMpi5);
  EXPECT_EQ(*detect_flavour("prterun (PRRTE) 3.0.8\n"), Flavour::kOpenMpi5);
  EXPECT_EQ(*detect_flavour("HYDRA build details:\n    Version: 4.0.2\n"), Flavour::kMpich);
  EXPECT_EQ(*detect_flavour("Intel(R) MPI Library for Linux* OS, Version 2021.10\n"), Flavour::kIntel);
  auto unknown = detect_flavour("something else");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("--mpi"), std::string::npos);
}

// Installs laid out as Debian lays them out: ORTE's orterun with orted, PRRTE's
// mpirun.openmpi with prted, hydra among them, each reached through symlinks.
TEST(MpiCommand, TellsOpenMpi4From5ByTheDaemonBesideTheLauncher) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("tmpi-flavour-" + std::to_string(getpid()));
  auto make = [&](const fs::path& file) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "#!/bin/sh\n";
    fs::permissions(file, fs::perms::owner_all);
  };
  make(root / "ompi4/bin/orterun");
  make(root / "ompi4/bin/orted");
  make(root / "ompi4/bin/mpiexec.hydra");
  fs::create_symlink(root / "ompi4/bin/orterun", root / "ompi4/bin/mpirun");
  make(root / "ompi5/bin/mpirun.openmpi");
  make(root / "ompi5/bin/prted");
  fs::create_directories(root / "alt");
  fs::create_symlink(root / "ompi5/bin/mpirun.openmpi", root / "alt/mpirun");
  make(root / "bare/bin/mpirun");

  EXPECT_EQ(flavour_from_install("mpirun", (root / "ompi4/bin").string()), Flavour::kOpenMpi4);
  EXPECT_EQ(flavour_from_install("mpirun", "/nonexistent:" + (root / "alt").string()), Flavour::kOpenMpi5);
  EXPECT_EQ(flavour_from_install((root / "alt/mpirun").string(), ""), Flavour::kOpenMpi5);
  // hydra beside orted is still hydra, and an install without a daemon says nothing.
  EXPECT_EQ(flavour_from_install("mpiexec.hydra", (root / "ompi4/bin").string()), std::nullopt);
  EXPECT_EQ(flavour_from_install("mpirun", (root / "bare/bin").string()), std::nullopt);
  EXPECT_EQ(flavour_from_install("mpirun", "/nonexistent"), std::nullopt);
  // The image's hand-off (an mpirun first on PATH) is passed over for the MPI's own.
  make(root / "handoff/mpirun");
  std::string path = (root / "handoff").string() + ":" + (root / "alt").string();
  EXPECT_EQ(find_program("mpirun", path), (root / "handoff/mpirun").string());
  EXPECT_EQ(find_program("mpirun", path, fs::canonical(root / "handoff/mpirun").string()),
            (root / "alt/mpirun").string());
  EXPECT_EQ(
      find_program("mpirun", (root / "handoff").string(), fs::canonical(root / "handoff/mpirun").string()),
      "");
  EXPECT_EQ(find_program("/x/mpirun", path), "/x/mpirun");
  fs::remove_all(root);
}

TEST(MpiCommand, ForwardsDefaultsNamesAndPrefixes) {
  auto names = forwarded_env({"NCCL_IB_HCA", "HOME", "HF_HOME", "MY_A", "MY_B", "SECRET", "TMPI_COORDINATOR",
                              "TMPI_SSH_DIR", "TMPI_BEAT_INTERVAL", "TMPI_LOST_AFTER", "TMPI_RANK_HOSTS",
                              "PATH", "LD_LIBRARY_PATH", "PATHEXT", "GLOO_SOCKET_IFNAME", "TMPI_START_GATE"},
                             {"WANDB_PROJECT"}, {"MY_"});
  // TMPI_SSH_DIR too: the agents find the job key where the launcher was told it is, or they
  // could not report which rank failed; and TMPI_BEAT_INTERVAL, or they would beat at their
  // default while the coordinator counts --lost-after against the launcher's.
  // TMPI_LOST_AFTER: an agent cut off gives up on the coordinator as late as it gives up on it.
  // TMPI_RANK_HOSTS: without it no agent can check where it runs (agent/placement.h).
  // TMPI_START_GATE: without it the agents would start their ranks before the ssh check passed.
  EXPECT_EQ(names, (std::vector<std::string>{"GLOO_SOCKET_IFNAME", "HF_HOME", "LD_LIBRARY_PATH", "MY_A",
                                             "MY_B", "NCCL_IB_HCA", "PATH", "TMPI_BEAT_INTERVAL",
                                             "TMPI_COORDINATOR", "TMPI_LOST_AFTER", "TMPI_RANK_HOSTS",
                                             "TMPI_SSH_DIR", "TMPI_START_GATE", "WANDB_PROJECT"}));
}

TEST(MpiCommand, ShellJoinQuotes) {
  EXPECT_EQ(shell_join({"a", "b c", "it's", ""}), "a 'b c' 'it'\\''s' ''");
}

TEST(RankAgent, OpenMpiVariables) {
  auto id = rank_identity({{"OMPI_COMM_WORLD_RANK", "5"},
                           {"OMPI_COMM_WORLD_SIZE", "8"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                           {"OMPI_COMM_WORLD_NODE_RANK", "1"}});
  ASSERT_TRUE(id);
  auto env = torch_env(*id, "job-node-0-0.job", "29500");
  EXPECT_EQ(env["RANK"], "5");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["NODE_RANK"], "1") << "from (rank - local rank) / local size, not OMPI's node rank";
  EXPECT_EQ(env["MASTER_ADDR"], "job-node-0-0.job");
}

TEST(RankAgent, HydraAndPmixVariables) {
  auto hydra = rank_identity(
      {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  ASSERT_TRUE(hydra);
  EXPECT_EQ(hydra->node_rank, 1);
  auto pmix = rank_identity({{"PMIX_RANK", "0"}, {"PMIX_SIZE", "1"}});
  ASSERT_TRUE(pmix);
  EXPECT_EQ(pmix->local_world_size, 1);
  auto none = rank_identity({{"HOME", "/root"}});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("PMIX_RANK"), std::string::npos);
}

TEST(RankAgent, NodeRankFollowsTheSlotLayoutOfHeterogeneousGroups) {
  EXPECT_EQ(slot_layout({8, 8, 4, 4, 4}), "8x2,4x3");
  // Hosts: two of 8 slots, then three of 4: rank 17 is on host 2, rank 27 on host 4.
  for (auto [rank, host] : {std::pair{0, 0}, {15, 1}, {16, 2}, {17, 2}, {20, 3}, {27, 4}, {28, 0}}) {
    auto id = rank_identity(
        {{"PMI_RANK", std::to_string(rank)}, {"PMI_SIZE", "56"}, {"TMPI_SLOT_LAYOUT", "8x2,4x3"}});
    ASSERT_TRUE(id);
    EXPECT_EQ(id->node_rank, host) << "rank " << rank;
  }
}

// attribute_failure: the order of blame, and the hosts asked only when nothing else explains
// a failed mpirun.
TEST(FailureAttribution, APrimaryCauseWinsAndNoHostIsAsked) {
  int asked = 0;
  AskHosts ask = [&]() -> std::optional<GoneHost> {
    ++asked;
    return GoneHost{"n-1", "host n-1 is gone (no DNS)"};
  };
  JobOutcome outcome{Failure{3, "rank 1 on n-0 exited with code 3", FailureKind::kRankFailed},
                     Failure{1, "rank 2 killed by signal 15", FailureKind::kRankFailed}, 1, "mpirun"};
  auto failure = attribute_failure(outcome, ask);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, 3);
  EXPECT_EQ(event_reason(failure->event), "RankFailed");
  EXPECT_EQ(asked, 0);
}

TEST(FailureAttribution, AFailedMpirunAsksTheHostsThenTheSecondaryThenItsStatus) {
  int asked = 0;
  std::optional<GoneHost> gone = GoneHost{"n-1", "host n-1 is gone (no DNS)"};
  AskHosts ask = [&] {
    ++asked;
    return gone;
  };
  JobOutcome outcome{std::nullopt, Failure{143, "rank 2 killed by signal 15", FailureKind::kRankFailed, true},
                     5, "mpirun"};
  auto failure = attribute_failure(outcome, ask);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->reason, "host n-1 is gone (no DNS) (see docs/troubleshooting.md#host-lost)");
  EXPECT_EQ(event_reason(failure->event), "HostLost");
  EXPECT_EQ(failure->host, "n-1");  // whose pod the API is then asked of (lost_host.h)
  EXPECT_EQ(failure->code, 75);     // the launcher's own: a lost host may pass on a retry
  EXPECT_FALSE(failure->from_job);
  gone.reset();  // every host answers: the rank killed by a signal is the cause
  EXPECT_EQ(attribute_failure(outcome, ask)->reason, "rank 2 killed by signal 15");
  outcome.secondary.reset();
  auto status = attribute_failure(outcome, ask);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->reason, "mpirun exited with status 5 (see docs/troubleshooting.md#mpirun-failed)");
  EXPECT_EQ(event_reason(status->event), "JobFailed");
  EXPECT_EQ(status->code, 5);  // mpirun's status is the job's, passed through
  EXPECT_TRUE(status->from_job);
  EXPECT_EQ(asked, 3);
}

TEST(FailureAttribution, ACleanExitIsNoFailureAndAsksNobody) {
  int asked = 0;
  AskHosts ask = [&]() -> std::optional<GoneHost> {
    ++asked;
    return GoneHost{"n-1", "host n-1 is gone"};
  };
  EXPECT_FALSE(attribute_failure(JobOutcome{std::nullopt, std::nullopt, 0, "mpirun"}, ask));
  EXPECT_EQ(asked, 0);
  // mpirun exited 0 but a rank was killed by a signal: the hosts are asked, then the rank.
  auto failure = attribute_failure(
      JobOutcome{std::nullopt, Failure{1, "rank 0 killed", FailureKind::kRankFailed}, 0, "mpirun"},
      [] { return std::optional<GoneHost>{}; });
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->reason, "rank 0 killed");
}

TEST(LauncherOptions, EveryPieceGetsItsPartOfTheParameters) {
  auto defaults = Params::parse(kScopeLauncher, {}, {});
  ASSERT_TRUE(defaults);
  LauncherOptions options = launcher_options(*defaults);
  EXPECT_EQ(options.wait, WaitFor::kSidecar);
  EXPECT_TRUE(options.preflight);
  EXPECT_EQ(options.report, "/etc/trainer-mpi/report.json");
  EXPECT_EQ(options.job.np, 0);  // the sum of the slots
  EXPECT_EQ(options.job.ssh_port, 2222);
  EXPECT_EQ(options.job.master_port, "29500");
  EXPECT_FALSE(options.job.ssh_dir_given);
  EXPECT_EQ(options.rendezvous.times.lost_after, std::chrono::seconds(15));
  EXPECT_EQ(options.status.interval, std::chrono::seconds(5));
  EXPECT_EQ(options.events.api_request_timeout, std::chrono::seconds(10));
  EXPECT_TRUE(options.fabric.passed_on.empty());  // nccl-check keeps its own defaults
  EXPECT_EQ(options.timeout.count(), 0);

  auto given =
      Params::parse(kScopeLauncher, {"--ssh-dir", "/keys", "--np", "3", "--wait", "ssh", "--events", "off"},
                    {{"TMPI_STATUS", "failures"}, {"TMPI_TIMEOUT", "1h"}});
  ASSERT_TRUE(given);
  options = launcher_options(*given);
  EXPECT_EQ(options.job.ssh_dir, "/keys");
  EXPECT_TRUE(options.job.ssh_dir_given);  // forwarded to the agents as TMPI_SSH_DIR
  EXPECT_EQ(options.job.np, 3);
  EXPECT_EQ(options.wait, WaitFor::kSsh);
  EXPECT_EQ(options.events.mode, EventsMode::kOff);
  EXPECT_EQ(options.status.mode, StatusMode::kFailures);
  EXPECT_EQ(options.timeout, std::chrono::hours(1));
}

TEST(RankRecord, OneShapeForReportedAndUnreportedRanks) {
  auto reported = rank_json({2, "n-1", true, 3, 0, 4.5, true});
  EXPECT_EQ(reported, nlohmann::json::parse(R"({"rank":2,"host":"n-1","state":"exited","code":3,"signal":0,
                                                "seconds":4.5,"reported":true})"));
  auto unreported = rank_json({0, "n-0", true, 0, 0, std::nullopt, false});
  EXPECT_TRUE(unreported["seconds"].is_null());
  EXPECT_FALSE(unreported["reported"].get<bool>());
  EXPECT_EQ(rank_json({1, "n-0", false, 0, 0, 1.0, true})["state"], "running");
  // Both have the same fields: report.json's readers need no second shape.
  for (const auto& [key, value] : reported.items()) EXPECT_TRUE(unreported.contains(key)) << key;
}

}  // namespace
}  // namespace tmpi::launch

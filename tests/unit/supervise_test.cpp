// The decisions of `mpi-launcher run` as pure steps (launcher/supervise.h, launcher/report.h),
// driven on a ManualClock's time with no socket and no child: who is blamed first, when a
// host is lost, when --timeout passes, when mpirun lingers after a clean end, and what mpirun
// and the agents are given.
#include "launcher/supervise.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/params.h"
#include "launcher/report.h"

namespace tmpi::launch {
namespace {

rdv::RankEvent exit_event(int rank, int code, int signal = 0) {
  return {rank, "node-" + std::to_string(rank), rdv::RankEventKind::kExit, code, signal, 12, "", ""};
}

TEST(Supervise, FirstOwnFailureIsPrimaryAndSignalsOnlySecondary) {
  JobTally tally;
  EXPECT_FALSE(record_rank_event(tally, exit_event(0, 0)));
  EXPECT_TRUE(record_rank_event(tally, exit_event(1, 143, 15)));  // stopped by MPI: secondary
  EXPECT_FALSE(record_rank_event(tally, exit_event(4, 137, 9)));
  EXPECT_FALSE(tally.failure.has_value());
  ASSERT_TRUE(tally.secondary.has_value());
  EXPECT_TRUE(record_rank_event(tally, exit_event(2, 3)));  // the first own failure: its tail is shown
  EXPECT_FALSE(record_rank_event(tally, exit_event(3, 4)));
  record_host_lost(tally, "node-5", "no beat for 15 s");  // after the rank: the rank stays the cause
  ASSERT_TRUE(tally.failure.has_value());
  EXPECT_EQ(tally.failure->code, 3);
  EXPECT_EQ(event_reason(tally.failure->event), "RankFailed");
  EXPECT_EQ(tally.failure->reason,
            "rank 2 on node-2 exited with code 3 after 12 s (see docs/troubleshooting.md#rank-failed)");
  EXPECT_EQ(tally.secondary->reason,
            "rank 1 on node-1 was killed by signal 15 after 12 s (see docs/troubleshooting.md#rank-killed)");
  EXPECT_EQ(tally.exited, 5);
  EXPECT_EQ(tally.failed, 4);
}

TEST(Supervise, AKillFromOutsideBeforeAnyFailureIsTheCauseNotItsPeersErrors) {
  JobTally tally;
  EXPECT_TRUE(record_rank_event(tally, exit_event(2, 137, 9)));  // the kubelet's, a person's SIGKILL
  EXPECT_FALSE(record_rank_event(tally, exit_event(0, 1)));      // torch: "connection reset by peer"
  ASSERT_TRUE(tally.failure.has_value());
  EXPECT_EQ(tally.failure->signal, 9);
  EXPECT_EQ(tally.failure->reason.find("rank 2 on node-2 was killed by signal 9"), 0u)
      << tally.failure->reason;

  JobTally bus;
  EXPECT_TRUE(record_rank_event(bus, exit_event(1, 135, 7)));  // SIGBUS: a memory fault
  ASSERT_TRUE(bus.failure.has_value());
  EXPECT_EQ(bus.failure->signal, 7);

  JobTally teardown;  // MPI's own SIGKILL comes after a SIGTERM, once something failed
  EXPECT_TRUE(record_rank_event(teardown, exit_event(1, 143, 15)));
  EXPECT_FALSE(record_rank_event(teardown, exit_event(3, 137, 9)));
  EXPECT_FALSE(teardown.failure.has_value());
  EXPECT_EQ(teardown.secondary->signal, 15);

  rdv::RankEvent oom = exit_event(2, 137, 9);
  oom.oom_killed = true;
  oom.memory_limit = 300LL << 20;
  JobTally out_of_memory;
  record_rank_event(out_of_memory, oom);
  ASSERT_TRUE(out_of_memory.failure.has_value());
  EXPECT_TRUE(out_of_memory.failure->oom_killed);
  EXPECT_NE(out_of_memory.failure->reason.find(
                "OOM killer after 12 s: its pod's memory cgroup counted an OOM kill at its limit of 300 MiB"),
            std::string::npos)
      << out_of_memory.failure->reason;
}

// The agent's count tells three SIGKILLs apart: the OOM killer's (a rise), another's (a count
// read at both ends that did not rise), and one it could not judge (no count).
TEST(Supervise, ASigkillWithNoOomCountedIsNamedAKillFromOutside) {
  rdv::RankEvent counted = exit_event(2, 137, 9);
  counted.oom_counted = true;
  JobTally from_outside;
  record_rank_event(from_outside, counted);
  ASSERT_TRUE(from_outside.failure.has_value());
  const std::string& reason = from_outside.failure->reason;
  EXPECT_NE(reason.find("killed by signal 9 (SIGKILL) from outside the job after 12 s: its memory cgroup "
                        "counted no OOM kill"),
            std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("out of memory?"), std::string::npos) << reason;
  EXPECT_NE(reason.find("#rank-killed"), std::string::npos) << reason;

  JobTally unknown;
  record_rank_event(unknown, exit_event(2, 137, 9));
  EXPECT_NE(unknown.failure->reason.find("(SIGKILL: out of memory?)"), std::string::npos)
      << "with no count the OOM killer stays a possibility";
  EXPECT_NE(unknown.failure->reason.find("#rank-out-of-memory"), std::string::npos);
}

TEST(Supervise, LostHostStopsTheJobWithAShortGrace) {
  ManualClock clock;
  Supervisor supervisor({4, Millis(0), Millis(10000)}, "mpirun", clock.now());
  JobTally tally;
  tally.started = 4;
  EXPECT_EQ(supervisor.step(tally, clock.now(), std::nullopt).next, Decision::Next::kWait);
  record_host_lost(tally, "node-1", "no beat for 15 s");
  clock.advance(Millis(20));
  Decision decision = supervisor.step(tally, clock.now(), std::nullopt);
  ASSERT_EQ(decision.next, Decision::Next::kStop);
  EXPECT_EQ(event_reason(decision.failure->event), "HostLost");
  EXPECT_EQ(decision.failure->code, static_cast<int>(Exit::kTempFail));
  EXPECT_EQ(decision.grace, kLostHostGrace);  // no daemon there passes SIGTERM on
  EXPECT_EQ(decision.says,
            "host node-1 lost (no beat for 15 s) (see docs/troubleshooting.md#host-lost); stopping 4 ranks");
}

TEST(Supervise, RankFailureKeepsTheWholeGrace) {
  ManualClock clock;
  Supervisor supervisor({2, Millis(0), Millis(10000)}, "mpirun", clock.now());
  JobTally tally;
  record_rank_event(tally, exit_event(0, 1));
  Decision decision = supervisor.step(tally, clock.now(), 143);  // a failure outranks the stop signal
  ASSERT_EQ(decision.next, Decision::Next::kStop);
  EXPECT_EQ(event_reason(decision.failure->event), "RankFailed");
  EXPECT_EQ(decision.grace, Millis(10000));
  EXPECT_EQ(decision.says,
            "rank 0 on node-0 exited with code 1 after 12 s (see docs/troubleshooting.md#rank-failed); "
            "stopping 1 other rank");
}

TEST(Supervise, TimeoutPassesOnTheClock) {
  ManualClock clock;
  Supervisor supervisor({2, Millis(60000), Millis(10000)}, "mpirun", clock.now());
  JobTally tally;
  clock.advance(Millis(59999));
  EXPECT_EQ(supervisor.step(tally, clock.now(), std::nullopt).next, Decision::Next::kWait);
  clock.advance(Millis(1));
  EXPECT_EQ(supervisor.step(tally, clock.now(), std::nullopt).next, Decision::Next::kTimedOut);
  // run.cpp records past_timeout() in the tally: the next step stops on it.
  tally.failure = past_timeout(Millis(60000), nlohmann::json::array());
  Decision decision = supervisor.step(tally, clock.now(), std::nullopt);
  EXPECT_EQ(decision.next, Decision::Next::kStop);
  EXPECT_TRUE(decision.says.ends_with("; stopping 2 ranks"))
      << decision.says;  // no rank failed: none is "other"
}

TEST(Supervise, MpirunLingeringAfterEveryCleanExitIsEnded) {
  ManualClock clock;
  Supervisor supervisor({2, Millis(0), Millis(10000)}, "prterun", clock.now());
  JobTally tally;
  record_rank_event(tally, exit_event(0, 0));
  record_rank_event(tally, exit_event(1, 0));
  EXPECT_EQ(supervisor.step(tally, clock.now(), std::nullopt).next, Decision::Next::kWait);
  clock.advance(kMpirunLinger - Millis(1));
  EXPECT_EQ(supervisor.step(tally, clock.now(), std::nullopt).next, Decision::Next::kWait);
  clock.advance(Millis(1));
  Decision decision = supervisor.step(tally, clock.now(), std::nullopt);
  EXPECT_EQ(decision.next, Decision::Next::kEndLingering);
  EXPECT_FALSE(decision.failure.has_value());
}

TEST(Supervise, StopSignalStopsTheJob) {
  ManualClock clock;
  Supervisor supervisor({2, Millis(0), Millis(10000)}, "mpirun", clock.now());
  Decision decision = supervisor.step(JobTally{}, clock.now(), 143);
  ASSERT_EQ(decision.next, Decision::Next::kStop);
  EXPECT_EQ(decision.failure->code, 143);
  EXPECT_EQ(event_reason(decision.failure->event), "JobStopped");
}

TEST(Supervise, MisplacedRanksAreNamedWithTheirTable) {
  JobTally tally;
  record_rank_event(tally, {3, "launcher", rdv::RankEventKind::kMisplaced, 0, 0, 0, "", "node-1"});
  record_rank_event(tally, {4, "launcher", rdv::RankEventKind::kMisplaced, 0, 0, 0, "", "node-1"});
  ASSERT_TRUE(tally.failure.has_value());
  EXPECT_EQ(event_reason(tally.failure->event), "RankMisplaced");
  EXPECT_EQ(tally.failure->reason,
            "rank 3 ran on launcher, not on node-1 as the hostfile says (see "
            "docs/troubleshooting.md#rank-misplaced)");
  std::optional<Failure> failure = tally.failure;
  std::string table = name_misplaced(failure, tally);
  EXPECT_NE(table.find("node-1"), std::string::npos);
  EXPECT_EQ(failure->reason.rfind("placement: 2 rank(s) ran elsewhere", 0), 0U);
}

TEST(LaunchEnvironment, RelayOrAgentsAskAtTheGate) {
  Job job;
  job.launcher_name = "launcher.svc";
  job.env["KEEP"] = "1";
  job.start_gate = true;
  LaunchAddresses addresses{{"10.0.0.7"}, "0.0.0.0", 29410, std::string("/tmp/relay.sock")};
  auto env = launch_environment(job, addresses);
  EXPECT_EQ(env.at("KEEP"), "1");
  EXPECT_EQ(env.at(env_name(param::kCoordinator.name)), "10.0.0.7:29410");
  EXPECT_EQ(env.at("TMPI_SSH_RELAY"), "/tmp/relay.sock");
  EXPECT_FALSE(env.contains(env_name(param::kStartGate.name)));
  addresses.relay_socket.reset();
  env = launch_environment(job, addresses);
  EXPECT_EQ(env.at(env_name(param::kStartGate.name)), "true");
  job.start_gate = false;
  env = launch_environment(job, addresses);
  EXPECT_FALSE(env.contains("TMPI_SSH_RELAY"));
  EXPECT_FALSE(env.contains(env_name(param::kStartGate.name)));
}

TEST(JobReport, CleanEndListsUnreportedRanksFromTheHostfile) {
  ReportParts parts;
  parts.snapshot = {{"hosts", nlohmann::json::array()},
                    {"ranks", {rank_json({1, "node-b", true, 0, 0, 3.0, true})}}};
  parts.placement = {"node-a.svc", "node-b.svc"};
  parts.command = {"mpirun", "x"};
  nlohmann::json report = job_report(parts, std::nullopt);
  ASSERT_EQ(report["ranks"].size(), 2U);
  EXPECT_EQ(report["ranks"][0]["host"], "node-a");
  EXPECT_EQ(report["ranks"][0]["reported"], false);
  EXPECT_FALSE(report.contains("check"));
  EXPECT_FALSE(report.contains("preflight"));
  report = job_report(parts, Failure{});
  EXPECT_EQ(report["ranks"].size(), 1U);  // after a failure, only what the agents said
}

}  // namespace
}  // namespace tmpi::launch

// Restarts in place (launcher/restarts.h): which failures restart (the infrastructure's, and
// the program's codes only where listed), the budget of N within a window on a ManualClock's
// time, the attempts' rows and their lines in the verdict; the rank agent's OOM count
// (agent/oom.h) that tells an OOM kill from another SIGKILL, and its field on the wire.
#include "launcher/restarts.h"

#include <csignal>

#include <gtest/gtest.h>

#include "agent/oom.h"
#include "common/clock.h"
#include "launcher/failure.h"
#include "launcher/verdict.h"
#include "rendezvous/protocol.h"

namespace tmpi::launch {
namespace {

using nlohmann::json;

Failure killed_rank(int signal, bool oom = false) {
  Failure failure{128 + signal, "rank 1 on node-1 was killed", FailureKind::kRankFailed, true};
  failure.signal = signal;
  failure.oom_killed = oom;
  return failure;
}

TEST(RestartCause, TheInfrastructuresFaultsRestartAndTheProgramsDoNot) {
  EXPECT_EQ(restart_cause({75, "host lost", FailureKind::kHostLost}, {}), RestartCause::kHostLost);
  EXPECT_EQ(restart_cause(killed_rank(SIGKILL), {}), RestartCause::kRankKilled);
  EXPECT_EQ(restart_cause(killed_rank(SIGBUS), {}), RestartCause::kRankKilled);
  EXPECT_EQ(restart_cause(killed_rank(SIGKILL, true), {}), std::nullopt)
      << "an OOM kill is the program's: it would only run out of memory again";
  EXPECT_EQ(restart_cause(killed_rank(SIGSEGV), {}), std::nullopt) << "a crash is the program's";
  EXPECT_EQ(restart_cause(killed_rank(SIGTERM), {}), std::nullopt) << "MPI's own teardown sends SIGTERM";

  Failure own{3, "rank 0 exited with code 3", FailureKind::kRankFailed, true};
  EXPECT_EQ(restart_cause(own, {}), std::nullopt);
  EXPECT_EQ(restart_cause(own, {42}), std::nullopt);
  EXPECT_EQ(restart_cause(own, {42, 3}), RestartCause::kRetryableExit);
  Failure shell_oom{137, "rank 1 on node-1 exited with code 137", FailureKind::kRankFailed, true};
  shell_oom.oom_killed = true;
  EXPECT_EQ(restart_cause(shell_oom, {137}), std::nullopt)
      << "a shell's child OOM-killed, even with 137 listed";
  EXPECT_EQ(restart_cause(killed_rank(SIGSEGV), {128 + SIGSEGV}), std::nullopt)
      << "a listed code is a code the program exited with, not a signal's 128+N";

  Failure fabric{69, "fabric check: node-1 is slow", FailureKind::kPreflightFailed};
  EXPECT_EQ(restart_cause(fabric, {}), std::nullopt) << "an ssh or DNS failure is setup, not the fabric";
  fabric.fabric = true;
  EXPECT_EQ(restart_cause(fabric, {}), RestartCause::kFabricFault);
  fabric.code = 78;
  EXPECT_EQ(restart_cause(fabric, {}), std::nullopt) << "78: the image has no NCCL; a retest finds none";

  for (FailureKind kind :
       {FailureKind::kJobFailed, FailureKind::kRankMisplaced, FailureKind::kRendezvousTimeout,
        FailureKind::kJobStopped, FailureKind::kJobTimeout})
    EXPECT_EQ(restart_cause({75, "x", kind}, {75}), std::nullopt) << event_reason(kind);
}

TEST(RestartCause, OnlyAFaultThatMayHaveLeftALinkBadChecksTheFabricAgain) {
  EXPECT_TRUE(recheck_fabric(RestartCause::kHostLost));
  EXPECT_TRUE(recheck_fabric(RestartCause::kFabricFault));
  EXPECT_FALSE(recheck_fabric(RestartCause::kRankKilled));
  EXPECT_FALSE(recheck_fabric(RestartCause::kRetryableExit));
}

TEST(RestartCause, TheNextAttemptWaitsForTheRanksOfLiveHostsOnly) {
  json snapshot = {
      {"hosts",
       {{{"name", "j-node-0-0.j"}, {"state", "ready"}}, {{"name", "j-node-0-1.j"}, {"state", "lost"}}}},
      {"ranks",
       {{{"rank", 0}, {"host", "j-node-0-0"}, {"state", "exited"}},
        {{"rank", 1}, {"host", "j-node-0-0"}, {"state", "running"}},
        {{"rank", 2}, {"host", "j-node-0-1"}, {"state", "running"}}}}};
  EXPECT_EQ(ranks_running_on_live_hosts(snapshot), std::vector<int>{1})
      << "rank 2's host is lost: nothing to hear";
  snapshot["ranks"][1]["state"] = "exited";
  EXPECT_TRUE(ranks_running_on_live_hosts(snapshot).empty());
  EXPECT_TRUE(ranks_running_on_live_hosts(json::object()).empty());
  EXPECT_TRUE(ranks_running_on_live_hosts({{"hosts", 3}, {"ranks", "x"}}).empty())
      << "a snapshot of another shape";
  EXPECT_TRUE(ranks_running_on_live_hosts(json::array()).empty());
}

TEST(RestartCause, EveryRankHasEndedOnlyWhenEachOfTheJobsRanksReportedItsEnd) {
  json snapshot = {{"ranks",
                    {{{"rank", 0}, {"host", "a"}, {"state", "exited"}},
                     {{"rank", 1}, {"host", "a"}, {"state", "running"}},
                     {{"rank", 2}, {"host", "b"}, {"state", "exited"}}}}};
  EXPECT_FALSE(every_rank_ended(snapshot, 3)) << "rank 1 still runs";
  snapshot["ranks"][1]["state"] = "exited";
  EXPECT_TRUE(every_rank_ended(snapshot, 3));
  EXPECT_FALSE(every_rank_ended(snapshot, 4)) << "rank 3 never reported: its agent may still run";
  snapshot["ranks"][2]["rank"] = 0;
  EXPECT_FALSE(every_rank_ended(snapshot, 3)) << "rank 0 twice is not rank 2";
  snapshot["ranks"][2]["rank"] = 7;
  EXPECT_FALSE(every_rank_ended(snapshot, 3)) << "a rank outside the job counts for none of it";
  EXPECT_FALSE(every_rank_ended(json::object(), 0));
  EXPECT_FALSE(every_rank_ended(json::array(), 3));
  EXPECT_FALSE(every_rank_ended({{"ranks", "x"}}, 1)) << "a snapshot of another shape";
}

// A rank that failed of itself reports before its agent ends what it left (a shell's child):
// its report says so, and the restart then waits for MPI's daemons, which wait for the agent.
TEST(RestartCause, ARankWhoseProcessesStillRanHasNotEnded) {
  json snapshot = {{"ranks",
                    {rank_json({0, "a", true, 137, 0, 1.0, true, true}),
                     rank_json({1, "b", true, 0, 15, 1.0, true, false})}}};
  EXPECT_FALSE(every_rank_ended(snapshot, 2)) << "rank 0's shell's child may still run";
  snapshot["ranks"][0] = rank_json({0, "a", true, 137, 0, 1.0, true, false});
  EXPECT_FALSE(snapshot["ranks"][0].contains("leftProcesses")) << "report.json as it was without them";
  EXPECT_TRUE(every_rank_ended(snapshot, 2));
}

TEST(RestartBudget, NRestartsWithinTheWindowThenNone) {
  ManualClock clock;
  RestartBudget budget({2, Millis(60000), {}});
  auto now = clock.now();
  EXPECT_TRUE(budget.allows(now));
  budget.spend(now);
  budget.spend(now + Millis(1000));
  EXPECT_FALSE(budget.allows(now + Millis(2000))) << "two spent within the minute";
  EXPECT_EQ(budget.in_window(now + Millis(2000)), 2);
  EXPECT_TRUE(budget.allows(now + Millis(60500))) << "the first has left the window";
  EXPECT_EQ(budget.in_window(now + Millis(60500)), 1);

  RestartBudget forever({1, Millis(0), {}});
  forever.spend(now);
  EXPECT_FALSE(forever.allows(now + Millis(3600000 * 24))) << "a window of 0 counts the job's whole life";
  EXPECT_FALSE(RestartBudget({0, Millis(60000), {}}).allows(now)) << "--restarts 0: none";
}

TEST(RestartOptions, ExitCodesAreCheckedAndTheErrorNamesTheWordAndTheFix) {
  auto codes = parse_exit_codes({"3", "42", "3"}, "--retryable-exit-codes");
  ASSERT_TRUE(codes);
  EXPECT_EQ(*codes, (std::vector<int>{3, 42}));
  for (const char* bad : {"0", "256", "-1", "3x", "", " 3", "99999999999999999999"}) {
    auto refused = parse_exit_codes({bad}, "--retryable-exit-codes");
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().exit, Exit::kUsage);
    EXPECT_NE(refused.error().message.find("--retryable-exit-codes"), std::string::npos);
    EXPECT_NE(refused.error().message.find("1..255"), std::string::npos);
  }
}

TEST(Attempts, EachAttemptIsARowAndALineOfTheVerdict) {
  std::vector<AttemptRecord> attempts = {
      {0, RestartCause::kHostLost, 75, "host node-1 lost (no beat for 15 s)", 41.25, 6.5, true},
      {1, RestartCause::kRankKilled, 137, "rank 2 on node-0 was killed by signal 9", 90.0, std::nullopt,
       false}};
  json rows = attempts_json(attempts);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["cause"], "HostLost");
  EXPECT_EQ(rows[0]["resumedAfter"], 6.5);
  EXPECT_TRUE(rows[1]["resumedAfter"].is_null());
  EXPECT_EQ(rows[1]["restarted"], false);

  json report = {{"ranks", json::array()},
                 {"exit", exit_record(Failure{137, "rank 2 was killed", FailureKind::kRankFailed, true})},
                 {"attempts", rows}};
  auto lines = verdict_lines(report, "/r.json");
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  EXPECT_NE(
      all.find("attempt 0 failed after 41.2 s (HostLost: host node-1 lost (no beat for 15 s)); restarted "
               "in place, running again 6.5 s later"),
      std::string::npos)
      << all;
  EXPECT_NE(
      all.find("attempt 1 failed after 90.0 s (RankKilled: rank 2 on node-0 was killed by signal 9); no "
               "restart left"),
      std::string::npos)
      << all;

  json many = json::array();
  for (int i = 0; i < 100; ++i) many.push_back(attempts_json({attempts[0]})[0]);
  report["attempts"] = many;
  auto bounded = verdict_lines(report, "/r.json");
  EXPECT_LE(termination_message(bounded).size(), kTerminationMessageMax);
  EXPECT_NE(termination_message(bounded).find("96 earlier attempts"), std::string::npos)
      << "the last few are shown, the rest counted, and the report's line still fits";
  EXPECT_NE(termination_message(bounded).find("report: /r.json"), std::string::npos);
}

TEST(OomCount, TheCountIsReadFromEitherCgroupVersionsFile) {
  EXPECT_EQ(oom_kill_count("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n"), 2);
  EXPECT_EQ(oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 7"), 7) << "v1's memory.oom_control";
  EXPECT_EQ(oom_kill_count("oom_kill x\n"), std::nullopt);
  EXPECT_EQ(oom_kill_count("oom_kill -1\n"), std::nullopt);
  EXPECT_EQ(oom_kill_count(""), std::nullopt);

  auto v2 = oom_count_files("0::/kubepods/pod1/c1\n", "/cg");
  EXPECT_EQ(v2, (std::vector<std::string>{"/cg/kubepods/pod1/c1/memory.events", "/cg/memory.events",
                                          "/cg/memory/memory.oom_control"}));
  auto v1 = oom_count_files("4:memory:/docker/abc\n0::/\n", "/cg");
  EXPECT_EQ(v1, (std::vector<std::string>{"/cg/memory.events", "/cg/memory/docker/abc/memory.oom_control",
                                          "/cg/memory/memory.oom_control"}));
  EXPECT_EQ(memory_limit_bytes("314572800\n"), 314572800);
  EXPECT_EQ(memory_limit_bytes("max\n"), std::nullopt) << "v2: no limit";
  EXPECT_EQ(memory_limit_bytes("9223372036854771712\n"), std::nullopt) << "v1: no limit";
  EXPECT_EQ(memory_limit_bytes("-5"), std::nullopt);

  auto hostile = oom_count_files("0::/../../etc\n4:memory:relative\n", "/cg");
  EXPECT_EQ(hostile, (std::vector<std::string>{"/cg/memory.events", "/cg/memory/memory.oom_control"}))
      << "a path that climbs out, or is not absolute, is not joined";
}

TEST(OomCount, TheReportCarriesItOnlyWhenTrueAndItIsSigned) {
  const std::string key(32, 'k');
  rdv::RankReport report{1, "h.j", rdv::RankEventKind::kExit, 137, 9, 3.0, "", "n1", ""};
  json plain = json::parse(rdv::signed_body(key, report));
  EXPECT_FALSE(plain.contains("oomKilled")) << "a body without it is as it was";
  report.oom_killed = true;
  json body = json::parse(rdv::signed_body(key, report));
  EXPECT_TRUE(rdv::signed_by(key, rdv::Kind::kRank, body));
  EXPECT_TRUE(std::get<rdv::RankReport>(rdv::parse_rank(body)).oom_killed);
  body["oomKilled"] = false;
  EXPECT_FALSE(rdv::signed_by(key, rdv::Kind::kRank, body)) << "the proof covers it";
  body["oomKilled"] = "yes";
  EXPECT_TRUE(std::holds_alternative<rdv::Refusal>(rdv::parse_rank(body)));

  EXPECT_FALSE(plain.contains("oomCounted"));
  report.oom_killed = false;
  report.oom_counted = true;
  json counted = json::parse(rdv::signed_body(key, report));
  EXPECT_TRUE(rdv::signed_by(key, rdv::Kind::kRank, counted));
  EXPECT_TRUE(std::get<rdv::RankReport>(rdv::parse_rank(counted)).oom_counted);
  counted["oomCounted"] = false;
  EXPECT_FALSE(rdv::signed_by(key, rdv::Kind::kRank, counted)) << "the proof covers it too";
  counted["oomCounted"] = 1;
  EXPECT_TRUE(std::holds_alternative<rdv::Refusal>(rdv::parse_rank(counted)));

  EXPECT_FALSE(plain.contains("leftProcesses"));
  report.oom_counted = false;
  report.left_processes = true;
  json left = json::parse(rdv::signed_body(key, report));
  EXPECT_TRUE(rdv::signed_by(key, rdv::Kind::kRank, left));
  EXPECT_TRUE(std::get<rdv::RankReport>(rdv::parse_rank(left)).left_processes);
  left["leftProcesses"] = false;
  EXPECT_FALSE(rdv::signed_by(key, rdv::Kind::kRank, left)) << "the proof covers it";
  left["leftProcesses"] = "yes";
  EXPECT_TRUE(std::holds_alternative<rdv::Refusal>(rdv::parse_rank(left)));
}

}  // namespace
}  // namespace tmpi::launch

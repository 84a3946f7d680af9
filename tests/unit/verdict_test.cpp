// The job's verdict as `kubectl describe pod` and `kubectl logs` show it (launcher/verdict.h),
// from report.json as run.cpp writes it: whose fault, the reason, the failed ranks, bounded to
// the kubelet's 4096 bytes at a whole UTF-8 character whatever the reason holds, and written
// in place only where the kubelet made the file.
#include "launcher/verdict.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/utf8.h"
#include "launcher/failure.h"

namespace tmpi::launch {
namespace {

using nlohmann::json;

json report_of(const std::optional<Failure>& failure, json ranks) {
  json report = {{"hosts", json::array()}, {"ranks", std::move(ranks)}, {"exit", exit_record(failure)}};
  report["exit"]["seconds"] = 12.34;
  return report;
}

json rank(int number, const std::string& host, int code, int signal = 0, bool exited = true) {
  return rank_json({number, host, exited, code, signal, 1.0, true});
}

TEST(Verdict, ARankOfTheJobFailedIsTheJobsOwnAndNamed) {
  Failure failure{3, "rank 1 on node-0 exited with code 3: bad input", FailureKind::kRankFailed, true};
  auto lines = verdict_lines(
      report_of(failure, {rank(0, "node-0", 0, 15), rank(1, "node-0", 3), rank(2, "node-1", 0, 0, false)}),
      "/etc/trainer-mpi/report.json");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "trainer-mpi: the job failed after 12.3 s: exit 3 (job), the job's own: it is not retried");
  EXPECT_EQ(lines[1], "reason: rank 1 on node-0 exited with code 3: bad input");
  EXPECT_EQ(lines[2], "ranks: 2 of 3 failed (rank 1 on node-0: exit 3; rank 0 on node-0: signal 15)");
  EXPECT_EQ(lines[3], "report: /etc/trainer-mpi/report.json (every host, rank and phase)");
}

TEST(Verdict, ALostHostIsTheInfrastructuresAndRetried) {
  Failure failure{static_cast<int>(Exit::kTempFail), "host node-1 lost: no beat for 30 s",
                  FailureKind::kHostLost};
  auto lines = verdict_lines(report_of(failure, json::array()), "r.json");
  EXPECT_EQ(
      lines[0],
      "trainer-mpi: the job failed after 12.3 s: exit 75 (temporary), the infrastructure's: the runtime "
      "restarts the job");
  EXPECT_EQ(lines[2], "ranks: none started");
}

TEST(Verdict, ASuccessSaysSoInOneLine) {
  auto lines = verdict_lines(report_of(std::nullopt, {rank(0, "a", 0), rank(1, "b", 0)}), "r.json");
  EXPECT_EQ(lines[0], "trainer-mpi: the job succeeded in 12.3 s: every rank exited 0");
  EXPECT_EQ(lines[1], "ranks: 2 of 2 exited 0, 0 running when it ended");
}

TEST(Verdict, ManyFailedRanksAreCountedAndFourNamed) {
  json ranks = json::array();
  for (int i = 0; i < 10; ++i) ranks.push_back(rank(i, "n", 1));
  auto lines = verdict_lines(report_of(Failure{1, "x", FailureKind::kRankFailed, true}, ranks), "r");
  EXPECT_NE(lines[2].find("ranks: 10 of 10 failed (rank 0 on n: exit 1; "), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("rank 3 on n: exit 1; and 6 more)"), std::string::npos) << lines[2];
}

// The rank that failed comes first, whatever its number: the ranks that MPI's teardown ended
// (SIGTERM) for it would otherwise fill the four names and hide it in "and N more".
TEST(Verdict, TheFailedRankIsNamedBeforeTheOnesStoppedForIt) {
  json ranks = json::array();
  for (int i = 0; i < 8; ++i) ranks.push_back(i == 6 ? rank(i, "n", 3) : rank(i, "n", 0, 15));
  auto lines = verdict_lines(report_of(Failure{3, "x", FailureKind::kRankFailed, true}, ranks), "r");
  EXPECT_EQ(lines[2],
            "ranks: 8 of 8 failed (rank 6 on n: exit 3; rank 0 on n: signal 15; rank 1 on n: signal 15; rank "
            "2 on n: "
            "signal 15; and 4 more)");
  // A shell that trapped MPI's SIGTERM and exited 128+15 was stopped too, not the cause.
  ranks = json::array({rank(0, "n", 143), rank(1, "n", 0, 9)});
  lines = verdict_lines(report_of(Failure{137, "x", FailureKind::kRankFailed, true}, ranks), "r");
  EXPECT_EQ(lines[2], "ranks: 2 of 2 failed (rank 1 on n: signal 9; rank 0 on n: exit 143)");
}

TEST(Verdict, AHostileReasonIsOneLineAndTheMessageFitsTheKubelet) {
  std::string reason = "line\nbreak\x1b[2J\xff";
  for (int i = 0; i < 3000; ++i) reason += "\xc3\xa9";  // 6000 bytes of é
  Failure failure{3, reason, FailureKind::kRankFailed, true};
  json ranks = json::array();
  for (int i = 0; i < 100; ++i) ranks.push_back(rank(i, std::string(300, 'h'), 2));
  auto lines = verdict_lines(report_of(failure, ranks), std::string(1000, 'p'));
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find_first_of("\n\r\x1b"), std::string::npos) << line.substr(0, 80);
    EXPECT_EQ(valid_utf8(line), line);
  }
  std::string message = termination_message(lines);
  EXPECT_LE(message.size(), kTerminationMessageMax);
  EXPECT_EQ(valid_utf8(message), message);
  EXPECT_EQ(message.rfind("trainer-mpi: the job failed", 0), 0u);
  EXPECT_NE(message.find("\nreason: line break"), std::string::npos);
}

TEST(Verdict, AReportThatHoldsLessStillGivesAVerdict) {
  for (const json& report : {json(nullptr), json::object(), json{{"exit", "x"}, {"ranks", 3}}}) {
    auto lines = verdict_lines(report, "r");
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines[0].rfind("trainer-mpi: the job failed", 0), 0u) << report.dump();
  }
}

TEST(Verdict, TheMessageIsWrittenInPlaceOnlyWhereTheFileExists) {
  char folder[] = "/tmp/verdict-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string missing = std::string(folder) + "/termination-log";
  EXPECT_TRUE(write_termination_message(missing, "x\n"));  // not in a pod: nothing, no error
  EXPECT_NE(access(missing.c_str(), F_OK), 0);
  { std::ofstream(missing) << std::string(5000, 'o'); }
  struct stat before {};
  stat(missing.c_str(), &before);
  ASSERT_TRUE(write_termination_message(missing, "the verdict\n"));
  std::stringstream got;
  got << std::ifstream(missing).rdbuf();
  EXPECT_EQ(got.str(), "the verdict\n");  // truncated, not appended
  struct stat after {};
  stat(missing.c_str(), &after);
  EXPECT_EQ(before.st_ino, after.st_ino);  // the same file: the kubelet's bind mount holds
  std::remove(missing.c_str());
  rmdir(folder);
}

}  // namespace
}  // namespace tmpi::launch

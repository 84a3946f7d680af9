// The exit-code table (common/error.h) and report.json's exit record (launcher/failure.h):
// the programs' own codes stay out of the range a user's program uses for itself, the
// codes a failure policy restarts on are exactly the infrastructure faults, and the README
// shows the table the code has.
#include <set>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/files.h"
#include "launcher/failure.h"

namespace tmpi {
namespace {

TEST(ExitCodes, OurOwnCodesAreInTheSysexitsRange) {
  std::set<int> seen;
  for (const auto& row : exit_table()) {
    int code = static_cast<int>(row.exit);
    EXPECT_TRUE(seen.insert(code).second) << "code " << code << " is listed twice";
    EXPECT_FALSE(row.name.empty());
    EXPECT_FALSE(row.meaning.empty());
    // 0 and 1 are every program's; 2 to 63 belong to users' programs (argparse's 2, ...).
    EXPECT_TRUE(code == 0 || code == 1 || (code >= 64 && code <= 78)) << row.name << " is " << code;
    EXPECT_EQ(exit_info(code), &row);
  }
  EXPECT_EQ(exit_info(2), nullptr);
  EXPECT_EQ(exit_info(137), nullptr);
}

TEST(ExitCodes, OnlyInfrastructureFaultsAreRetried) {
  std::set<int> retried;
  for (const auto& row : exit_table()) {
    if (row.retry) retried.insert(static_cast<int>(row.exit));
  }
  // examples/ restart the JobSet on exactly these (podFailurePolicy onExitCodes).
  EXPECT_EQ(retried,
            (std::set<int>{static_cast<int>(Exit::kUnavailable), static_cast<int>(Exit::kTempFail)}));
  EXPECT_EQ(static_cast<int>(Exit::kUnavailable), 69);
  EXPECT_EQ(static_cast<int>(Exit::kTempFail), 75);
}

TEST(ExitCodes, ReadmeHoldsTheGeneratedTable) {
  auto readme = read_file(std::string(TMPI_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme);
  EXPECT_NE(readme->find(exit_codes_markdown()), std::string::npos)
      << "README.md's exit-code table is stale; regenerate it with: mpi-init --exit-codes-markdown\n"
      << exit_codes_markdown();
}

TEST(ExitRecord, SaysWhichSideACodeIsFrom) {
  using launch::exit_record;
  using launch::Failure;
  using launch::FailureKind;
  auto ok = exit_record(std::nullopt);
  EXPECT_EQ(ok["code"], 0);
  EXPECT_EQ(ok["name"], "ok");
  // A rank's own 69 is the user's program, not a broken host: no retry.
  auto rank = exit_record(Failure{69, "rank 1 on n-0 exited with code 69", FailureKind::kRankFailed, true});
  EXPECT_EQ(rank["code"], 69);
  EXPECT_EQ(rank["side"], "job");
  EXPECT_EQ(rank["name"], "job");
  EXPECT_EQ(rank["retry"], false);
  auto lost = exit_record(Failure{75, "host n-1 lost (no beat for 15 s)", FailureKind::kHostLost});
  EXPECT_EQ(lost["side"], "launcher");
  EXPECT_EQ(lost["name"], "temporary");
  EXPECT_EQ(lost["retry"], true);
  EXPECT_EQ(lost["reason"], "host n-1 lost (no beat for 15 s)");
  auto stopped = exit_record(Failure{143, "stopped by signal 15", FailureKind::kJobStopped});
  EXPECT_EQ(stopped["side"], "launcher");
  EXPECT_EQ(stopped["name"], "stopped");
  EXPECT_EQ(stopped["retry"], false);
}

TEST(ExitRecord, AJobPastItsTimeoutNamesTheRanksStillRunning) {
  nlohmann::json ranks = nlohmann::json::array();
  ranks.push_back({{"rank", 0}, {"host", "n-0"}, {"state", "exited"}});
  for (int rank = 1; rank <= 10; ++rank)
    ranks.push_back({{"rank", rank}, {"host", "n-1"}, {"state", "running"}});
  auto failure = launch::past_timeout(Millis(90000), ranks);
  EXPECT_EQ(failure.code, 75);
  EXPECT_EQ(event_reason(failure.event), "JobTimeout");
  EXPECT_EQ(failure.reason,
            "the job ran past --timeout (90 s); still running: rank 1 on n-1, rank 2 on n-1, rank 3 on n-1, "
            "rank 4 on n-1, rank 5 on n-1, rank 6 on n-1, rank 7 on n-1, rank 8 on n-1 and 2 more (see "
            "docs/troubleshooting.md#job-timeout)");
  EXPECT_EQ(launch::past_timeout(Millis(5000), nlohmann::json::array()).reason,
            "the job ran past --timeout (5 s); still running: no rank had reported its start "
            "(see docs/troubleshooting.md#job-timeout)");
  EXPECT_EQ(launch::exit_record(failure)["retry"], true);
}

// The Events' reasons are an interface (alert rules, `kubectl get events --field-selector`):
// every kind of failure has its own, the names docs/design.md lists under Events.
TEST(ExitRecord, EveryFailureKindHasItsOwnEventReason) {
  using launch::FailureKind;
  std::set<std::string_view> reasons;
  for (auto kind : {FailureKind::kJobFailed, FailureKind::kRankFailed, FailureKind::kRankMisplaced,
                    FailureKind::kHostLost, FailureKind::kPreflightFailed, FailureKind::kRendezvousTimeout,
                    FailureKind::kJobStopped, FailureKind::kJobTimeout})
    reasons.insert(launch::event_reason(kind));
  EXPECT_EQ(reasons,
            (std::set<std::string_view>{"RendezvousTimeout", "PreflightFailed", "RankFailed", "RankMisplaced",
                                        "HostLost", "JobStopped", "JobTimeout", "JobFailed"}));
  EXPECT_EQ(launch::Failure{}.event, FailureKind::kJobFailed);
}

}  // namespace
}  // namespace tmpi

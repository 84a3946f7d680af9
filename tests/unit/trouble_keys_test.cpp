// The troubleshooting keys (launcher/trouble_keys.h) against the page that explains them,
// docs/troubleshooting.md, and the code that names them: one set of keys in the table, the
// page's headings and the code's messages, both ways, so that a new message without a
// section, or a section left over, fails here. Then a few failures as the user meets them,
// through report.json and the verdict's lines, each ending with its key.
#include "launcher/trouble_keys.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "launcher/failure.h"
#include "launcher/run_steps.h"
#include "launcher/supervise.h"
#include "launcher/verdict.h"

namespace tmpi::launch {
namespace {

using nlohmann::json;

std::string trouble_source_text(const std::string& relative) {
  std::ifstream in(std::string(TMPI_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The page's sections: each "## KEY" heading, whose GitHub anchor is the key itself.
std::set<std::string> trouble_page_keys(const std::string& page) {
  std::set<std::string> keys;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("## ", 0) == 0) keys.insert(line.substr(3));
  }
  return keys;
}

// "host-never-registered" -> "kHostNeverRegistered": the enumerator the code names.
std::string trouble_enumerator(std::string_view key) {
  std::string name = "k";
  bool upper = true;
  for (char c : key) {
    if (c == '-') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return name;
}

json trouble_report(const std::optional<Failure>& failure) {
  json report = {{"hosts", json::array()}, {"ranks", json::array()}, {"exit", exit_record(failure)}};
  report["exit"]["seconds"] = 3.0;
  return report;
}

// The verdict's reason line for `failure`, after its way through report.json.
std::string trouble_reason_line(const Failure& failure) {
  std::vector<std::string> lines = verdict_lines(trouble_report(failure), "/etc/trainer-mpi/report.json");
  EXPECT_GE(lines.size(), 2u);
  return lines.size() >= 2 ? lines[1] : "";
}

std::string ending_with(std::string_view key) {
  return " (see docs/troubleshooting.md#" + std::string(key) + ")";
}

bool trouble_ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(TroubleKeys, AreStableKebabCaseAndUnique) {
  std::set<std::string_view> seen;
  for (const TroubleEntry& entry : kTroubleTable) {
    EXPECT_TRUE(seen.insert(entry.key).second) << entry.key;
    EXPECT_EQ(trouble_key(entry.trouble), entry.key);
    EXPECT_FALSE(entry.title.empty()) << entry.key;
    for (char c : entry.key) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '-') << entry.key;
    EXPECT_EQ(trouble_key_in("it failed" + trouble_note(entry.trouble)), entry.key);
  }
}

TEST(TroubleKeys, ThePageHasOneSectionPerKeyBothWays) {
  const std::string page = trouble_source_text("docs/troubleshooting.md");
  ASSERT_FALSE(page.empty()) << "docs/troubleshooting.md is missing";
  std::set<std::string> registry;
  for (const TroubleEntry& entry : kTroubleTable) registry.insert(std::string(entry.key));
  EXPECT_EQ(trouble_page_keys(page), registry);
  // Each section says what is seen, why, and what to do, before the next one starts.
  for (const std::string& key : registry) {
    const std::size_t at = page.find("\n## " + key + "\n");
    ASSERT_NE(at, std::string::npos) << key;
    const std::size_t next = page.find("\n## ", at + 1);
    const std::string section = page.substr(at, next == std::string::npos ? std::string::npos : next - at);
    for (const char* part : {"**Symptom**", "**Cause**", "**Fix**"})
      EXPECT_NE(section.find(part), std::string::npos) << key << " lacks " << part;
  }
}

TEST(TroubleKeys, TheCodeNamesEveryKey) {
  std::string code =
      trouble_source_text("bundle/start.c") + trouble_source_text("launcher/mpirun_handoff.sh");
  for (const auto& file : std::filesystem::directory_iterator(std::string(TMPI_SOURCE_DIR) + "/launcher")) {
    if (file.path().extension() == ".cpp")
      code += trouble_source_text("launcher/" + file.path().filename().string());
  }
  for (const TroubleEntry& entry : kTroubleTable) {
    const bool named = code.find("Trouble::" + trouble_enumerator(entry.key)) != std::string::npos ||
                       code.find("#" + std::string(entry.key) + ")") != std::string::npos;
    EXPECT_TRUE(named) << entry.key << ": no message in the code names it";
  }
}

TEST(TroubleKeys, AKeyOnceGivenIsKept) {
  EXPECT_EQ(trouble_key_in("no note here"), std::nullopt);
  EXPECT_EQ(trouble_key_in("x (see docs/troubleshooting.md#not-a-key)"), std::nullopt);
  std::string stopped =
      with_trouble("host n-1 lost" + trouble_note(Trouble::kHostLost), Trouble::kJobStopped);
  EXPECT_EQ(trouble_key_in(stopped), "host-lost");
  EXPECT_EQ(trouble_key_in(with_trouble("port taken", Trouble::kSetupFailed)), "setup-failed");
}

TEST(TroubleKeys, ARankThatFailedNamesItsKeyInTheVerdictAndTheReport) {
  JobTally tally;
  record_rank_event(tally, {1, "node-0", rdv::RankEventKind::kExit, 3, 0, 4.0, "", ""});
  ASSERT_TRUE(tally.failure);
  EXPECT_EQ(trouble_report(tally.failure)["exit"]["troubleshooting"], "rank-failed");
  EXPECT_TRUE(trouble_ends_with(trouble_reason_line(*tally.failure), ending_with("rank-failed")));
  EXPECT_EQ(trouble_report(std::nullopt)["exit"]["troubleshooting"], nullptr);
}

TEST(TroubleKeys, SigkillIsNamedAsAPossibleOutOfMemory) {
  JobTally tally;
  record_rank_event(tally, {2, "node-1", rdv::RankEventKind::kExit, 137, 9, 60.0, "", ""});
  record_rank_event(tally, {3, "node-1", rdv::RankEventKind::kExit, 143, 15, 60.0, "", ""});
  ASSERT_TRUE(tally.failure) << "a SIGKILL before any failure is the cause (launcher/supervise.h)";
  const std::string line = trouble_reason_line(*tally.failure);
  EXPECT_NE(line.find("SIGKILL: out of memory?"), std::string::npos) << line;
  EXPECT_TRUE(trouble_ends_with(line, ending_with("rank-out-of-memory"))) << line;
  JobTally other;
  record_rank_event(other, {3, "node-1", rdv::RankEventKind::kExit, 143, 15, 60.0, "", ""});
  EXPECT_EQ(trouble_key_in(other.secondary->reason), "rank-killed");
}

TEST(TroubleKeys, LostHostsTimeoutsAndMpirunNameTheirs) {
  JobTally tally;
  record_host_lost(tally, "node-1", "no beat for 15 s");
  EXPECT_TRUE(trouble_ends_with(trouble_reason_line(*tally.failure), ending_with("host-lost")));
  EXPECT_EQ(trouble_key_in(past_timeout(Millis(5000), json::array()).reason), "job-timeout");
  auto mpirun = attribute_failure({std::nullopt, std::nullopt, 5, "mpirun"}, nullptr);
  ASSERT_TRUE(mpirun);
  EXPECT_EQ(trouble_report(mpirun)["exit"]["troubleshooting"], "mpirun-failed");
}

TEST(TroubleKeys, APreflightNamesItsCheck) {
  std::vector<CheckRow> ssh = {{"node-1", "ssh", "connection refused"}};
  Error refused = preflight_failed(ssh);
  EXPECT_EQ(trouble_key_in(refused.message), "ssh-refused");
  // The message names the host and why: it is what the termination message, the Event and
  // report.json carry, where the table printed above it in the log is not.
  EXPECT_EQ(refused.message,
            "preflight failed on 1 check(s); no rank was started: node-1 ssh: connection refused" +
                trouble_note(Trouble::kSshRefused));
  // The fabric check's culprit host, not its world row (an all-reduce over every rank names no one).
  Error two = preflight_failed({{"world", "mpi world", "all-reduce below --min-busbw"},
                                {"node-2", "mpi host", "slow beside the good peer"}});
  EXPECT_EQ(two.message,
            "preflight failed on 2 check(s); no rank was started: node-2 mpi host: slow beside the good peer "
            "(and 1 "
            "more in the log's table)" +
                trouble_note(Trouble::kFabricCheckFailed));
  EXPECT_EQ(
      preflight_failed({{"world", "mpi world", "slow"}, {"node-2", "mpi timeout", "silent"}}).message,
      "preflight failed on 2 check(s); no rank was started: node-2 mpi timeout: silent (and 1 more in the "
      "log's table)" +
          trouble_note(Trouble::kFabricCheckFailed));
  Error long_row = preflight_failed({{std::string(300, 'h'), "ssh", std::string(3000, 'r')}});
  EXPECT_LT(long_row.message.size(), 1024U);  // within an Event's bound, with its key
  EXPECT_EQ(trouble_key_in(long_row.message), "ssh-refused");
  EXPECT_EQ(preflight_trouble({{"node-1", "dns", "no such host"}}, Exit::kUnavailable),
            Trouble::kHostUnresolved);
  EXPECT_EQ(preflight_trouble({{"node-1", "nccl bandwidth", "slow"}}, Exit::kUnavailable),
            Trouble::kFabricCheckFailed);
  Error no_nccl = preflight_failed({{"launcher", "nccl-check", "no libnccl"}}, Exit::kConfig);
  Failure failure{static_cast<int>(no_nccl.exit), no_nccl.message, FailureKind::kPreflightFailed};
  EXPECT_EQ(trouble_report(failure)["exit"]["troubleshooting"], "nccl-missing");
  EXPECT_TRUE(trouble_ends_with(trouble_reason_line(failure), ending_with("nccl-missing")));
}

TEST(TroubleKeys, ALongReasonKeepsItsKeyWhole) {
  Failure failure{75, std::string(5000, 'x') + trouble_note(Trouble::kHostNeverRegistered),
                  FailureKind::kRendezvousTimeout};
  const std::string line = trouble_reason_line(failure);
  EXPECT_LE(line.size(), 2048u + 8u);
  EXPECT_TRUE(trouble_ends_with(line, ending_with("host-never-registered"))) << line.substr(line.size() - 80);
}

}  // namespace
}  // namespace tmpi::launch

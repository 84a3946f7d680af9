// nccl-check's options, as every rank must hold them alike (ncclcheck/options.h): the text
// that the ranks compare in init, and the error that names the flag where they differ.
#include <gtest/gtest.h>

#include "ncclcheck/options.h"
#include "ncclcheck/report.h"

// Ranks that were given different options would post collectives that their peers never
// match; init refuses them, naming the flag and both values.
TEST(Options, RanksThatDisagreeAreNamedWithTheFlag) {
  tmpi::check::Options given;
  given.sizes = {1 << 20, 4 << 20};
  given.pair_bytes = 1 << 20;
  std::string same = tmpi::check::options_text(given);
  EXPECT_FALSE(tmpi::check::options_disagreement({same, same, same, same}));
  EXPECT_FALSE(tmpi::check::options_disagreement({}));

  tmpi::check::Options slower = given;
  slower.step_timeout = std::chrono::seconds(120);
  auto problem = tmpi::check::options_disagreement(
      {tmpi::check::options_text(slower), tmpi::check::options_text(slower), same, same});
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("--step-timeout is 2m on rank 0 but 1m on rank 2"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("2 of 4 rank(s)"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("mpirun -x"), std::string::npos) << *problem;

  tmpi::check::Options fewer = given;
  fewer.sizes = {1 << 20};
  problem = tmpi::check::options_disagreement({same, tmpi::check::options_text(fewer)});
  ASSERT_TRUE(problem);
  EXPECT_NE(
      problem->find(
          "the sizes (--min-bytes, --max-bytes, --step-factor) is 1 MiB,4 MiB on rank 0 but 1 MiB on rank 1"),
      std::string::npos)
      << *problem;
}

TEST(Options, DisagreementExitsWithUsage) {
  tmpi::check::Report report;
  report.failure = "the ranks were given different options";
  report.failure_exit = tmpi::Exit::kUsage;
  EXPECT_EQ(report.exit_code(), 64);
  report.failure_exit = tmpi::Exit::kUnavailable;
  EXPECT_EQ(report.exit_code(), 69);
}

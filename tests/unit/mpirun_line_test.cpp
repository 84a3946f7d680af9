// A user's own mpirun line under mpi-launcher: each MPI's grammar (which options take values,
// -x and -genv forms, --mca pairs, single-dash long forms, --name=value, unknown options),
// then the launcher's checks of the options it owns (taken where they agree, one error naming
// both values where they conflict, refused by name where they would break the job or where
// the MPI's own mpirun would refuse them: an unknown option, Open MPI's ranks past the slots),
// and the split of `mpi-launcher run`'s words into the launcher's parameters and mpirun's, and
// the descriptor limit mpirun gets.
#include "launcher/mpirun_line.h"

#include <sys/resource.h>

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "common/params.h"
#include "common/process.h"
#include "launcher/mpi_command.h"
#include "launcher/mpirun_grammar.h"

namespace tmpi::launch {
namespace {

using Words = std::vector<std::string>;

MpirunLine parsed(Grammar grammar, const Words& words, bool ends_at_dashdash = false) {
  auto line = parse_mpirun_line(grammar, words, ends_at_dashdash);
  EXPECT_TRUE(line) << (line ? "" : line.error().message);
  return line ? *line : MpirunLine{};
}

TEST(MpirunGrammar, OpenMpi4ReadsHorovodsLine) {
  // Horovod's docs/mpi.rst line, single-dash long forms and all.
  auto line = parsed(Grammar::kOrte, {"-np", "16", "-bind-to", "none", "-map-by", "slot", "-x",
                                      "NCCL_DEBUG=INFO", "-x", "LD_LIBRARY_PATH", "-mca", "pml", "ob1",
                                      "-mca", "btl", "^openib", "python", "train.py"});
  ASSERT_EQ(line.options.size(), 7U);
  EXPECT_EQ(line.options[0].role, Role::kNp);
  EXPECT_EQ(line.options[0].values, Words{"16"});
  EXPECT_EQ(line.options[3].role, Role::kEnv);
  EXPECT_EQ(line.options[3].values, Words{"NCCL_DEBUG=INFO"});
  EXPECT_EQ(line.options[5].role, Role::kMca);
  EXPECT_EQ(line.options[6].words, (Words{"-mca", "btl", "^openib"}));
  EXPECT_EQ(line.command, (Words{"python", "train.py"}));
}

TEST(MpirunGrammar, ValueAfterEqualsAndDoubleDash) {
  auto line = parsed(Grammar::kPrrte, {"--map-by=ppr:1:node", "--prtemca", "plm_ssh_agent", "ssh", "-H",
                                       "a,b", "--", "./app", "-np", "3"});
  ASSERT_EQ(line.options.size(), 3U);
  EXPECT_EQ(line.options[0].name, "map-by");
  EXPECT_EQ(line.options[0].values, Words{"ppr:1:node"});
  EXPECT_EQ(line.options[0].words, Words{"--map-by=ppr:1:node"});
  EXPECT_EQ(line.options[1].values, (Words{"plm_ssh_agent", "ssh"}));
  EXPECT_EQ(line.options[2].role, Role::kHosts);
  EXPECT_EQ(line.command, (Words{"./app", "-np", "3"}));  // the program's own -np is its own
}

TEST(MpirunGrammar, HydraStripsDashesIgnoresCaseAndReadsGenvBothWays) {
  auto line = parsed(Grammar::kHydra, {"-genv", "A", "1", "--genv", "B=2", "-ENV", "C", "3", "---ppn", "2",
                                       "-hosts=a,b", "-prepend-rank", "./app", "x"});
  ASSERT_EQ(line.options.size(), 6U);
  EXPECT_EQ(line.options[0].words, (Words{"-genv", "A", "1"}));
  EXPECT_EQ(line.options[1].words, (Words{"--genv", "B=2"}));
  EXPECT_EQ(line.options[2].words, (Words{"-ENV", "C", "3"}));
  EXPECT_EQ(line.options[3].role, Role::kPerNode);
  EXPECT_EQ(line.options[4].values, Words{"a,b"});
  EXPECT_EQ(line.options[5].values, Words{});
  EXPECT_EQ(line.command, (Words{"./app", "x"}));
}

TEST(MpirunGrammar, UnknownOptionIsAFlagInALineAndTakesBareWordsBeforeDashDash) {
  auto line = parsed(Grammar::kOrte, {"--vendor-knob", "prog", "arg"});
  ASSERT_EQ(line.options.size(), 1U);
  EXPECT_FALSE(line.options[0].known);
  EXPECT_EQ(line.command, (Words{"prog", "arg"}));
  auto run = parsed(Grammar::kOrte, {"--vendor-knob", "3", "4", "--tag-output", "--", "prog"}, true);
  ASSERT_EQ(run.options.size(), 2U);
  EXPECT_EQ(run.options[0].words, (Words{"--vendor-knob", "3", "4"}));
  EXPECT_EQ(run.command, Words{"prog"});
}

TEST(MpirunGrammar, ShortOfValuesOrStrayWordsAreUsageErrors) {
  auto short_of = parse_mpirun_line(Grammar::kOrte, {"--mca", "pml"}, false);
  ASSERT_FALSE(short_of);
  EXPECT_EQ(short_of.error().exit, Exit::kUsage);
  EXPECT_NE(short_of.error().message.find("--mca"), std::string::npos);
  auto stray = parse_mpirun_line(Grammar::kHydra, {"python", "--"}, true);
  ASSERT_FALSE(stray);
  EXPECT_NE(stray.error().message.find("python"), std::string::npos);
}

LineContext job(std::string hostfile_text = "a.svc slots=2\nb.svc slots=2\n") {
  return {{{"a.svc", 2}, {"b.svc", 2}},
          "/etc/mpi/hostfile",
          0,
          false,
          [text = std::move(hostfile_text)](const std::string&) -> Expected<std::string> { return text; }};
}

Expected<TakenLine> take(Grammar grammar, const Words& words, const LineContext& context = job()) {
  auto line = parse_mpirun_line(grammar, words, false);
  if (!line) return line.take_error();
  return take_mpirun_line(*line, context);
}

TEST(MpirunLine, TakesWhatAgreesAndPassesTheRestInOrder) {
  auto taken = take(Grammar::kOrte, {"--hostfile",
                                     "/etc/mpi/hostfile",
                                     "-np",
                                     "4",
                                     "--bind-to",
                                     "none",
                                     "-x",
                                     "A=1",
                                     "--mca",
                                     "plm_rsh_agent",
                                     "ssh",
                                     "--mca",
                                     "pml",
                                     "ucx",
                                     "--tag-output",
                                     "--report-bindings",
                                     "--oversubscribe",
                                     "-H",
                                     "a:2,b:2",
                                     "prog"});
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_EQ(taken->np, 4);
  EXPECT_EQ(taken->passed, (Words{"--bind-to", "none", "-x", "A=1", "--mca", "pml", "ucx", "--tag-output",
                                  "--report-bindings", "--oversubscribe"}));
  EXPECT_EQ(taken->placement, "");
}

TEST(MpirunLine, AHostfileOfOtherHostsIsRefusedNamingBoth) {
  auto taken = take(Grammar::kOrte, {"--hostfile", "/tmp/h", "prog"}, job("a.svc slots=2\nc.svc slots=2\n"));
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().exit, Exit::kUsage);
  EXPECT_NE(taken.error().message.find("--hostfile /tmp/h"), std::string::npos) << taken.error().message;
  EXPECT_NE(taken.error().message.find("c.svc:2"), std::string::npos);
  EXPECT_NE(taken.error().message.find("b.svc:2"), std::string::npos);
  // hydra's dialect, short names, any order: the same hosts.
  EXPECT_TRUE(take(Grammar::kHydra, {"-f", "/tmp/h", "prog"}, job("b:2\na:2\n")));
}

TEST(MpirunLine, ConflictingRankCountsNameBothValues) {
  LineContext context = job();
  context.np = 4;
  auto taken = take(Grammar::kOrte, {"-np", "8", "prog"}, context);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().exit, Exit::kUsage);
  EXPECT_NE(taken.error().message.find("-np 8"), std::string::npos);
  EXPECT_NE(taken.error().message.find("--np 4"), std::string::npos);
  auto twice = take(Grammar::kHydra, {"-n", "2", "-np", "3", "prog"});
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("-n 2"), std::string::npos);
  EXPECT_NE(twice.error().message.find("-np 3"), std::string::npos);
}

TEST(MpirunLine, RefusesWhatWouldBreakTheLaunchByName) {
  const std::vector<std::pair<Grammar, Words>> refused = {
      {Grammar::kOrte, {"--mca", "plm_rsh_agent", "/opt/kubexec.sh", "prog"}},
      {Grammar::kOrte, {"-mca", "plm_rsh_args", "-p 22", "prog"}},
      {Grammar::kPrrte, {"--prtemca", "plm_ssh_agent", "rsh", "prog"}},
      {Grammar::kOrte, {"--mca", "plm", "slurm", "prog"}},
      {Grammar::kHydra, {"-launcher", "slurm", "prog"}},
      {Grammar::kHydra, {"-bootstrap-exec", "/bin/rsh", "prog"}},
      {Grammar::kHydra, {"-genvall", "prog"}},
      {Grammar::kOrte, {"--app", "/tmp/appfile"}},
      {Grammar::kOrte, {"-H", "x,y", "prog"}},
      {Grammar::kOrte, {"-np", "2", "a", ":", "-np", "2", "b"}},
  };
  for (const auto& [grammar, words] : refused) {
    auto taken = take(grammar, words);
    ASSERT_FALSE(taken) << words[0];
    EXPECT_EQ(taken.error().exit, Exit::kUsage);
    bool names_it = taken.error().message.find(words[0]) != std::string::npos ||
                    taken.error().message.find("MPMD") != std::string::npos;
    EXPECT_TRUE(names_it) << taken.error().message;
    // Named once, not twice.
    auto first = taken.error().message.find(words[0] + " ");
    EXPECT_EQ(taken.error().message.find(words[0] + " ", first + 1), std::string::npos)
        << taken.error().message;
  }
  EXPECT_TRUE(take(Grammar::kHydra, {"-launcher", "ssh", "prog"}));
}

TEST(MpirunLine, MappingTurnsThePlacementCheckOffAndImpliesTheRankCount) {
  auto ppr = take(Grammar::kOrte, {"--map-by", "ppr:1:node", "--bind-to", "none", "prog"});
  ASSERT_TRUE(ppr);
  EXPECT_EQ(ppr->np, 2);
  EXPECT_EQ(ppr->placement, "--map-by ppr:1:node");
  EXPECT_EQ(ppr->passed, (Words{"--map-by", "ppr:1:node", "--bind-to", "none"}));
  auto ppn = take(Grammar::kHydra, {"-ppn", "1", "prog"});
  ASSERT_TRUE(ppn);
  EXPECT_EQ(ppn->np, 2);
  auto slot = take(Grammar::kOrte, {"-map-by", "slot", "prog"});
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->placement, "");
  EXPECT_EQ(slot->np, 0);
}

// The job has 4 slots (a.svc:2, b.svc:2). Open MPI's mpirun refuses more ranks than slots
// unless told to oversubscribe, hydra places them round after round.
TEST(MpirunLine, RanksPastTheSlotsAreRefusedUnderOpenMpiUnlessOversubscribed) {
  struct Row {
    Grammar grammar;
    Words words;
    bool accepted;
  };
  const std::vector<Row> rows = {
      {Grammar::kOrte, {"-np", "8", "prog"}, false},
      {Grammar::kOrte, {"-n", "5", "prog"}, false},
      {Grammar::kPrrte, {"--np", "8", "prog"}, false},
      {Grammar::kPrrte, {"-c", "8", "prog"}, false},
      {Grammar::kOrte, {"--oversubscribe", "--nooversubscribe", "-np", "8", "prog"}, false},
      {Grammar::kPrrte,
       {"--map-by", "node:oversubscribe", "--map-by", "node:NOOVERSUBSCRIBE", "-np", "8", "p"},
       false},
      {Grammar::kOrte, {"-np", "4", "prog"}, true},
      {Grammar::kOrte, {"-np", "8", "--oversubscribe", "prog"}, true},
      {Grammar::kOrte, {"--map-by", "node:OVERSUBSCRIBE", "-np", "8", "prog"}, true},
      {Grammar::kPrrte, {"--oversubscribe", "--np", "8", "prog"}, true},
      {Grammar::kPrrte, {"--map-by", ":oversubscribe", "-np", "8", "prog"}, true},
      {Grammar::kPrrte, {"--map-by=ppr:4:node:oversubscribe,span", "-np", "8", "prog"}, true},
      {Grammar::kHydra, {"-n", "8", "prog"}, true},
      {Grammar::kHydra, {"-np", "64", "prog"}, true},
  };
  for (const auto& row : rows) {
    auto taken = take(row.grammar, row.words);
    std::string line = fmt::format("{}", fmt::join(row.words, " "));
    if (row.accepted) {
      ASSERT_TRUE(taken) << line << ": " << taken.error().message;
      continue;
    }
    ASSERT_FALSE(taken) << line;
    const std::string& message = taken.error().message;
    EXPECT_EQ(taken.error().exit, Exit::kUsage) << message;
    std::string np = row.words[row.words.size() - 2];
    for (const std::string& said :
         {fmt::format("{} ranks", np), std::string("4 slots on 2 host(s)"), std::string("Open MPI"),
          std::string("4 ranks or fewer"), std::string("numNodes"), std::string("--oversubscribe")}) {
      EXPECT_NE(message.find(said), std::string::npos) << line << ": no '" << said << "' in " << message;
    }
  }
  // By slot with leave to oversubscribe is still by slot: the agents' layout wraps round too.
  auto wrapped = take(Grammar::kPrrte, {"--map-by", "slot:OVERSUBSCRIBE", "-np", "8", "prog"});
  ASSERT_TRUE(wrapped);
  EXPECT_EQ(wrapped->np, 8);
  EXPECT_EQ(wrapped->placement, "");
  EXPECT_EQ(wrapped->passed, (Words{"--map-by", "slot:OVERSUBSCRIBE"}));
}

// mpirun refuses an option it does not know; passed on, its value would become the command.
TEST(MpirunLine, AnOptionTheMpiDoesNotKnowIsRefusedByNameWithTheFix) {
  struct Row {
    Grammar grammar;
    Words words;
    std::string hint;
  };
  const std::vector<Row> rows = {
      {Grammar::kOrte, {"-ppn", "2", "prog"}, "--map-by ppr:N:node"},
      {Grammar::kPrrte, {"-ppn", "2", "prog"}, "--map-by ppr:N:node"},
      {Grammar::kOrte, {"-genv", "A", "1", "prog"}, "-x NAME=VALUE"},
      {Grammar::kPrrte, {"-genvlist", "A", "prog"}, "-x NAME"},
      {Grammar::kOrte, {"--bogus", "3", "prog"}, "mpirun --help"},
      {Grammar::kPrrte, {"--bogus=3", "prog"}, "mpirun --help"},
      {Grammar::kPrrte, {"--novm", "prog"}, "Open MPI 4's mpirun (ORTE) takes it"},
      {Grammar::kHydra, {"--bogus", "3", "prog"}, "mpirun --help"},
      {Grammar::kHydra, {"-x", "A=1", "prog"}, "-genv NAME VALUE"},
      {Grammar::kHydra, {"--npernode", "2", "prog"}, "-ppn N"},
      {Grammar::kHydra, {"--oversubscribe", "-n", "8", "prog"}, "without it, so drop it"},
      {Grammar::kHydra, {"--mca", "pml", "ucx", "prog"}, "MPIR_CVAR"},
  };
  for (const auto& row : rows) {
    auto taken = take(row.grammar, row.words);
    ASSERT_FALSE(taken) << row.words[0];
    const std::string& message = taken.error().message;
    EXPECT_EQ(taken.error().exit, Exit::kUsage) << message;
    EXPECT_NE(message.find(fmt::format("\"{}\" is unknown to {}", row.words[0], grammar_name(row.grammar))),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(row.hint), std::string::npos)
        << row.words[0] << ": no '" << row.hint << "' in " << message;
    auto first = message.find(row.words[0]);  // named once
    EXPECT_EQ(message.find(row.words[0], first + 1), std::string::npos) << message;
  }
  // `mpi-launcher run --bogus 3 -- prog`: the same refusal, the option's bare words and all.
  auto line = parse_mpirun_line(Grammar::kOrte, {"--bogus", "3", "--", "prog"}, true);
  ASSERT_TRUE(line);
  auto taken = take_mpirun_line(*line, job());
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().exit, Exit::kUsage);
  EXPECT_NE(taken.error().message.find("\"--bogus\" is unknown"), std::string::npos) << taken.error().message;
}

TEST(MpirunLine, HydraEnvListJoinsTheLaunchersOwn) {
  auto taken = take(Grammar::kHydra, {"-genvlist", "A,B", "-genv", "C", "1", "prog"});
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->env_names, (Words{"A", "B"}));
  EXPECT_EQ(taken->passed, (Words{"-genv", "C", "1"}));
}

TEST(RunArgs, SplitsTheLaunchersParametersFromMpirunsOptions) {
  auto split = split_run_args({"--np", "4", "--bind-to", "none", "--dry-run", "--hosts=/h.json", "-x", "A",
                               "--mpi-arg", "--timeout", "--mpi-arg=30", "--", "prog", "--np", "1"},
                              kScopeLauncher);
  EXPECT_EQ(split.launcher_args,
            (Words{"--np", "4", "--dry-run", "--hosts=/h.json", "--", "prog", "--np", "1"}));
  EXPECT_EQ(split.mpi_words, (Words{"--bind-to", "none", "-x", "A", "--timeout", "30"}));
  EXPECT_EQ(split_words(" --bind-to  none\t-x A "), (Words{"--bind-to", "none", "-x", "A"}));
  // A launcher flag's boolean value as its own word stays with it; another word is mpirun's.
  auto flags =
      split_run_args({"--preflight", "false", "--dry-run", "--report-bindings", "--", "p"}, kScopeLauncher);
  EXPECT_EQ(flags.launcher_args, (Words{"--preflight", "false", "--dry-run", "--", "p"}));
  EXPECT_EQ(flags.mpi_words, Words{"--report-bindings"});
}

TEST(DescriptorLimit, CapsAHugeOrUnlimitedSoftLimitAndRaisesALowOneToTheHardLimit) {
  EXPECT_EQ(capped_nofile(1048576, 1048576), kNofileCap);
  EXPECT_EQ(capped_nofile(RLIM_INFINITY, RLIM_INFINITY), kNofileCap);
  EXPECT_EQ(capped_nofile(kNofileCap, RLIM_INFINITY), std::nullopt);
  EXPECT_EQ(capped_nofile(1024, 1024), std::nullopt);  // nothing to raise it to
  // containerd 2's soft 1024 under a hard 512 Ki: raised, so that the coordinator has room.
  EXPECT_EQ(capped_nofile(1024, 524288), kNofileCap);
  EXPECT_EQ(capped_nofile(1024, 4096), 4096U);
  EXPECT_EQ(capped_nofile(4096, 8192, 2048), 2048U);
}

}  // namespace
}  // namespace tmpi::launch

// The parameter registry: precedence (flag > TMPI_ variable > default), hard errors that
// name the flag or variable, and the README table generated from the same rows.
#include "common/params.h"

#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "agent/contract.h"
#include "common/files.h"

namespace tmpi {
namespace {

using Env = std::map<std::string, std::string>;

TEST(Params, DefaultsThenEnvironmentThenFlag) {
  auto by_default = Params::parse(kScopeInit, {}, {});
  ASSERT_TRUE(by_default);
  EXPECT_EQ(by_default->str(param::kOut), "/etc/trainer-mpi")
      << "the runtimes' folder: Trainer's /etc/mpi is read-only";
  EXPECT_FALSE(by_default->is_set(param::kOut));

  auto by_env = Params::parse(kScopeInit, {}, Env{{"TMPI_OUT", "/x"}});
  ASSERT_TRUE(by_env);
  EXPECT_EQ(by_env->str(param::kOut), "/x");
  EXPECT_TRUE(by_env->is_set(param::kOut));
  ASSERT_EQ(by_env->env_overrides().size(), 1U);
  EXPECT_EQ(by_env->env_overrides()[0], "out=/x (from TMPI_OUT)");

  auto by_flag = Params::parse(kScopeInit, {"--out", "/y"}, Env{{"TMPI_OUT", "/x"}});
  ASSERT_TRUE(by_flag);
  EXPECT_EQ(by_flag->str(param::kOut), "/y");
  auto with_equals = Params::parse(kScopeInit, {"--out=/z"}, {});
  ASSERT_TRUE(with_equals);
  EXPECT_EQ(with_equals->str(param::kOut), "/z");
}

// Sets HOME for one test and puts the old value (or its absence) back, so that no later
// test in this process sees the change.
class ScopedHome {
 public:
  explicit ScopedHome(const char* value) {
    const char* old = getenv("HOME");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("HOME", value, 1);
  }
  ~ScopedHome() {
    if (had_) {
      setenv("HOME", old_.c_str(), 1);
    } else {
      unsetenv("HOME");
    }
  }
  ScopedHome(const ScopedHome&) = delete;
  ScopedHome& operator=(const ScopedHome&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

TEST(Params, HomeIsExpandedInDefaults) {
  std::string before = getenv("HOME") != nullptr ? getenv("HOME") : "(unset)";
  {
    ScopedHome home("/home/someone");
    auto params = Params::parse(kScopeInit, {}, {});
    ASSERT_TRUE(params);
    EXPECT_EQ(params->str(param::kSshDir), "/home/someone/.ssh");
  }
  EXPECT_EQ(getenv("HOME") != nullptr ? getenv("HOME") : "(unset)", before) << "HOME was not put back";
}

TEST(Params, UnparsableEnvironmentValueNamesTheVariable) {
  auto params = Params::parse(kScopeInit, {}, Env{{"TMPI_SSH_PORT", "22x"}});
  ASSERT_FALSE(params);
  EXPECT_EQ(params.error().exit, Exit::kUsage);
  EXPECT_NE(params.error().message.find("TMPI_SSH_PORT"), std::string::npos) << params.error().message;
  EXPECT_NE(params.error().message.find("'22x'"), std::string::npos);
}

// A port of 70000 is an error that names the range, never port 4464 (70000 mod 65536).
TEST(Params, IntegersOutOfTheirRangeAreRefused) {
  auto port = Params::parse(kScopeLauncher, {"--rendezvous-port", "70000"}, {});
  ASSERT_FALSE(port);
  EXPECT_EQ(port.error().exit, Exit::kUsage);
  EXPECT_NE(port.error().message.find("--rendezvous-port"), std::string::npos) << port.error().message;
  EXPECT_NE(port.error().message.find("70000 is out of range: 1 to 65535"), std::string::npos)
      << port.error().message;
  auto zero = Params::parse(kScopeInit, {}, Env{{"TMPI_SSH_PORT", "0"}});
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("TMPI_SSH_PORT"), std::string::npos);
  EXPECT_FALSE(Params::parse(kScopeCheck, {"--step-factor", "1"}, {}));
  EXPECT_TRUE(Params::parse(kScopeLauncher, {"--rendezvous-port", "65535", "--np", "1"}, {}));
  // Every integer parameter has a range, and its default lies within it.
  for (const auto& spec : param_table()) {
    if (spec.type != ParamType::kInt) continue;
    EXPECT_LT(spec.max, std::numeric_limits<long long>::max()) << spec.name << " has no range";
  }
}

TEST(Params, UnparsableFlagNamesTheFlag) {
  auto params = Params::parse(kScopeInit, {"--ssh-port", "many"}, {});
  ASSERT_FALSE(params);
  EXPECT_NE(params.error().message.find("--ssh-port"), std::string::npos);
}

TEST(Params, ChoicesAreEnforced) {
  auto params = Params::parse(kScopeInit, {"--role", "worker"}, {});
  ASSERT_FALSE(params);
  EXPECT_NE(params.error().message.find("launcher|node"), std::string::npos) << params.error().message;
  auto bad_bool = Params::parse(kScopeInit, {}, Env{{"TMPI_LAUNCHER_AS_NODE", "perhaps"}});
  ASSERT_FALSE(bad_bool);
  EXPECT_NE(bad_bool.error().message.find("TMPI_LAUNCHER_AS_NODE"), std::string::npos);
}

TEST(Params, UnknownFlagAndAbbreviationAreErrors) {
  EXPECT_FALSE(Params::parse(kScopeInit, {"--no-such-flag"}, {}));
  EXPECT_FALSE(Params::parse(kScopeInit, {"--ssh-d", "/x"}, {}));  // no guessing
}

TEST(Params, BoolsListsAndRest) {
  auto params = Params::parse(kScopeInit,
                              {"--launcher-as-node", "--replicated-jobs", "launcher=1",
                               "--replicated-jobs=node=2", "--", "echo", "--out"},
                              {});
  ASSERT_TRUE(params) << params.error().message;
  EXPECT_TRUE(params->flag(param::kLauncherAsNode));
  EXPECT_EQ(params->list(param::kReplicatedJobs), (std::vector<std::string>{"launcher=1", "node=2"}));
  EXPECT_EQ(params->rest(), (std::vector<std::string>{"echo", "--out"}));
}

// A boolean flag is bare or --name=VALUE: the word after it is never its value, so
// `--dry-run false` cannot be read two ways (it was a real run, while `--dry-run maybe` was a
// dry run that handed "maybe" on).
TEST(Params, BooleanFlagsAreBareOrGivenWithEquals) {
  for (const auto& [args, expected] :
       std::vector<std::pair<std::vector<std::string>, bool>>{{{"--dry-run"}, true},
                                                              {{"--dry-run=true"}, true},
                                                              {{"--dry-run=YES"}, true},
                                                              {{"--dry-run=1"}, true},
                                                              {{"--dry-run=false"}, false},
                                                              {{"--dry-run=no"}, false},
                                                              {{"--dry-run=0"}, false},
                                                              {{}, false}}) {
    auto params = Params::parse(kScopeLauncher, args, {});
    ASSERT_TRUE(params) << params.error().message;
    EXPECT_EQ(params->flag(param::kDryRun), expected) << (args.empty() ? "(none)" : args[0]);
    EXPECT_EQ(params->is_set(param::kDryRun), !args.empty());
  }
  // A word after a bare one that is no boolean is the command's own (a positional), not its value.
  auto word = Params::parse(kScopeInit, {"--launcher-as-node", "somefile"}, {});
  ASSERT_TRUE(word) << word.error().message;
  EXPECT_TRUE(word->flag(param::kLauncherAsNode));
  EXPECT_EQ(word->positional(), (std::vector<std::string>{"somefile"}));
}

TEST(Params, BooleanFlagRefusesASeparateValueWithTheFix) {
  for (const std::string value : {"false", "true", "0", "off", "Yes"}) {
    auto params = Params::parse(kScopeLauncher, {"--dry-run", value, "--hosts=/h.json"}, {});
    ASSERT_FALSE(params) << value;
    EXPECT_EQ(params.error().exit, Exit::kUsage);
    EXPECT_NE(params.error().message.find("--dry-run takes no separate value, and '" + value +
                                          "' follows it: "
                                          "write --dry-run=" +
                                          value),
              std::string::npos)
        << params.error().message;
  }
}

TEST(Params, BooleanFlagRefusesAValueThatIsNotABoolean) {
  for (const std::string value : {"maybe", "on", "off", "", "truely"}) {
    auto params = Params::parse(kScopeLauncher, {"--preflight=" + value}, {});
    ASSERT_FALSE(params) << value;
    EXPECT_EQ(params.error().exit, Exit::kUsage);
    EXPECT_NE(params.error().message.find("--preflight: '" + value +
                                          "' is not a boolean: give true, false, 1, 0, "
                                          "yes or no (--preflight alone is true)"),
              std::string::npos)
        << params.error().message;
  }
  auto env = Params::parse(kScopeLauncher, {}, Env{{"TMPI_PREFLIGHT", "on"}});
  ASSERT_FALSE(env);
  EXPECT_NE(env.error().message.find("TMPI_PREFLIGHT: 'on' is not a boolean (true, false, 1, 0, yes or no)"),
            std::string::npos)
      << env.error().message;
}

TEST(Params, Durations) {
  EXPECT_EQ(*parse_duration("300"), std::chrono::seconds(300));
  EXPECT_EQ(*parse_duration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*parse_duration("5m"), std::chrono::minutes(5));
  EXPECT_FALSE(parse_duration("5 min"));
  EXPECT_FALSE(parse_duration("s"));
  // A count of hours past what milliseconds hold is an error, not a wrapped (negative) duration.
  auto huge = parse_duration("9223372036854775h");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("too long a duration"), std::string::npos) << huge.error().message;
  EXPECT_EQ(format_duration(std::chrono::milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(std::chrono::minutes(10)), "10m");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(0)), "0");
}

TEST(Params, DurationsOutOfTheirRangeAreRefused) {
  // A beat interval of 0 would make every agent beat back to back.
  auto zero = Params::parse(kScopeLauncher, {"--beat-interval", "0"}, {});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().exit, Exit::kUsage);
  EXPECT_NE(zero.error().message.find("--beat-interval"), std::string::npos) << zero.error().message;
  EXPECT_NE(zero.error().message.find("0 is out of range: 100ms to 10m"), std::string::npos)
      << zero.error().message;
  auto env = Params::parse(kScopeLauncher, {}, Env{{"TMPI_LOST_AFTER", "1000h"}});
  ASSERT_FALSE(env);
  EXPECT_NE(env.error().message.find("TMPI_LOST_AFTER"), std::string::npos) << env.error().message;
  EXPECT_TRUE(Params::parse(kScopeLauncher, {"--beat-interval", "100ms", "--timeout", "0"}, {}));
  // Every duration has a range, and its default lies within it.
  for (const auto& spec : param_table()) {
    if (spec.type != ParamType::kDuration) continue;
    EXPECT_GT(spec.min, std::numeric_limits<long long>::min()) << spec.name << " has no range";
    auto value = parse_duration(spec.default_value);
    ASSERT_TRUE(value) << spec.name;
    EXPECT_GE(value->count(), spec.min) << spec.name;
    EXPECT_LE(value->count(), spec.max) << spec.name;
  }
}

TEST(Params, SizesAndNumbers) {
  auto params =
      Params::parse(kScopeCheck, {"--max-bytes", "1G", "--min-bytes", "64k", "--min-fraction", "0.25"},
                    Env{{"TMPI_PAIR_BYTES", "4096"}});
  ASSERT_TRUE(params);
  EXPECT_EQ(params->bytes(param::kMaxBytes), std::uint64_t{1} << 30);
  EXPECT_EQ(params->bytes(param::kMinBytes), std::uint64_t{64} << 10);
  EXPECT_EQ(params->bytes(param::kPairBytes), 4096U);
  EXPECT_DOUBLE_EQ(params->number(param::kMinFraction), 0.25);
  EXPECT_DOUBLE_EQ(params->number(param::kMinBusbw), 0.0);
  auto bad_size = Params::parse(kScopeCheck, {"--max-bytes", "12X"}, {});
  ASSERT_FALSE(bad_size);
  EXPECT_NE(bad_size.error().message.find("--max-bytes: '12X' is not a size (use 4096, 64K, 1M or 1G)"),
            std::string::npos);
  auto bad_number = Params::parse(kScopeCheck, {}, Env{{"TMPI_MIN_BUSBW", "fast"}});
  ASSERT_FALSE(bad_number);
  EXPECT_NE(bad_number.error().message.find("TMPI_MIN_BUSBW: 'fast' is not a number"), std::string::npos);
}

TEST(Params, HelpListsEveryRowOfTheScope) {
  std::string help = help_text("mpi-init", kScopeInit);
  // The exit codes come from the one table, the sysexits codes included.
  for (const ExitInfo& row : exit_table()) {
    EXPECT_NE(help.find(fmt::format(" {} {},", static_cast<int>(row.exit), row.name)), std::string::npos)
        << row.name << " is missing from --help:\n"
        << help;
  }
  for (const auto& spec : param_table()) {
    if ((spec.scopes & kScopeInit) == 0) continue;
    EXPECT_NE(help.find("--" + std::string(spec.name)), std::string::npos) << spec.name;
    EXPECT_NE(help.find(env_name(spec.name)), std::string::npos) << spec.name;
  }
}

TEST(Params, EveryRowIsWellFormed) {
  std::set<std::string_view> names;
  for (const auto& spec : param_table()) {
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate row " << spec.name;
    EXPECT_FALSE(spec.help.empty()) << spec.name;
    EXPECT_EQ(spec.help.find('\n'), std::string_view::npos) << spec.name;
    if (!spec.default_value.empty() && spec.default_value.find("$HOME") == std::string_view::npos) {
      EXPECT_TRUE(validate_param(spec, spec.default_value, "default")) << spec.name;
    }
  }
}

// Each reader takes a handle of its own type only: reading a port as a string, or an
// integer as a duration, does not compile (NCCL_PARAM's typed parameters are the anchor).
template <typename Handle>
constexpr bool readable_as_string = requires(const Params& params, Handle handle) {
  params.str(handle);
};
template <typename Handle>
constexpr bool readable_as_duration = requires(const Params& params, Handle handle) {
  params.duration(handle);
};
static_assert(readable_as_string<decltype(param::kSshDir)> && readable_as_string<decltype(param::kWait)>);
static_assert(!readable_as_string<decltype(param::kSshPort)> && !readable_as_string<decltype(param::kGrace)>);
static_assert(readable_as_duration<decltype(param::kGrace)> &&
              !readable_as_duration<decltype(param::kSshPort)>);

TEST(Params, EveryHandleNamesItsOwnRowWithItsType) {
  ASSERT_EQ(param_table().size(), kParamCount);
  for (std::size_t i = 0; i < param_table().size(); ++i) EXPECT_EQ(param_table()[i].index, i);
  EXPECT_EQ(param_table()[param::kSshPort.index].name, "ssh-port");
  EXPECT_EQ(param_table()[param::kSshPort.index].type, ParamType::kInt);
  EXPECT_EQ(param_table()[param::kGrace.index].type, decltype(param::kGrace)::kType);
}

TEST(Params, AParameterOutsideTheScopeReadsAsItsDefault) {
  // mpi-init has no --grace: a reader of it gets the row's default, never a hole (before,
  // a string lookup outside the scope dereferenced end() in a release build).
  auto params = Params::parse(kScopeInit, {}, {{"TMPI_GRACE", "99s"}});
  ASSERT_TRUE(params);
  EXPECT_EQ(params->duration(param::kGrace), std::chrono::seconds(10));
  EXPECT_FALSE(params->is_set(param::kGrace));
  EXPECT_EQ(params->text(param::kGrace), "10s");
  // In the scope, every type is parsed once, when the parameters are.
  auto launcher =
      Params::parse(kScopeLauncher, {"--ssh-port", "2200", "--grace", "2m", "--env", "A,B", "--env", "C"},
                    {{"TMPI_DRY_RUN", "yes"}});
  ASSERT_TRUE(launcher);
  EXPECT_EQ(launcher->integer(param::kSshPort), 2200);
  EXPECT_EQ(launcher->text(param::kSshPort), "2200");
  EXPECT_EQ(launcher->duration(param::kGrace), std::chrono::minutes(2));
  EXPECT_TRUE(launcher->flag(param::kDryRun));
  EXPECT_EQ(launcher->list(param::kEnv), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(launcher->integer(param::kNp), 0);  // no default: unset, zero
  EXPECT_FALSE(launcher->is_set(param::kNp));
}

TEST(Params, ReadmeHoldsTheGeneratedTable) {
  auto readme = read_file(std::string(TMPI_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme);
  EXPECT_NE(readme->find(markdown_table()), std::string::npos)
      << "README.md's parameter table is stale; regenerate it with: mpi-init --params-markdown\n"
      << markdown_table();
}

}  // namespace
}  // namespace tmpi

namespace tmpi {
namespace {

// mpi-rank shows and reads what the launcher hands every agent (agent/contract.h) and the
// log's own two, nothing of the launcher's other 50: its --help is for a person debugging a
// rank, and an option it would ignore is not to be offered.
TEST(Params, TheRankAgentsScopeIsItsContract) {
  std::set<std::string> scoped, expected{"log-format"};
  for (const auto& spec : param_table()) {
    if ((spec.scopes & kScopeRank) != 0) scoped.insert(std::string(spec.name));
  }
  for (std::string_view name : contract::kAgentParameters) expected.insert(std::string(name));
  EXPECT_EQ(scoped, expected);
  const std::string help = help_text("mpi-rank", kScopeRank);
  EXPECT_NE(help.find("--coordinator"), std::string::npos);
  EXPECT_EQ(help.find("--hosts"), std::string::npos) << help;
  EXPECT_EQ(help.find("--mpi-arg"), std::string::npos);
  // A launcher's variable in the agent's environment is not the agent's: its default stays.
  auto params = Params::parse(kScopeRank, {}, {{"TMPI_COORDINATOR", "10.0.0.1:29410"}, {"TMPI_NP", "bogus"}});
  ASSERT_TRUE(params) << params.error().message;
  EXPECT_EQ(params->str(param::kCoordinator), "10.0.0.1:29410");
  EXPECT_FALSE(Params::parse(kScopeRank, {"--hosts", "x"}, {}));  // not an option of mpi-rank
}

}  // namespace
}  // namespace tmpi

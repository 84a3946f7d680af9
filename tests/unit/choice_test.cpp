// Choices as enums (common/choice.h): every table of spellings holds exactly its row's values,
// in the row's order, so that an enum and its row cannot drift apart; Params::choice reads the
// value that parse() took, from a flag or a variable, as its enum.
#include "common/choice.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/log.h"
#include "common/params.h"
#include "initcontainer/role.h"
#include "launcher/choices.h"
#include "ncclcheck/report.h"

namespace tmpi {
namespace {

std::vector<std::string> row_values(ParamRef handle) {
  std::vector<std::string> values;
  std::string_view choices = param_table()[handle.index].choices;
  while (!choices.empty()) {
    auto bar = choices.find('|');
    values.emplace_back(choices.substr(0, bar));
    choices = bar == std::string_view::npos ? std::string_view{} : choices.substr(bar + 1);
  }
  return values;
}

template <typename E, std::size_t N>
std::vector<std::string> spelled(const Spellings<E, N>& spellings) {
  std::vector<std::string> names;
  for (const auto& spelling : spellings) names.emplace_back(spelling.name);
  return names;
}

TEST(Choices, EveryTableSpellsItsRowValueForValue) {
  EXPECT_EQ(spelled(launch::kWaitForSpellings), row_values(param::kWait));
  EXPECT_EQ(spelled(launch::kPlacementCheckSpellings), row_values(param::kPlacement));
  EXPECT_EQ(spelled(launch::kSshCheckWhenSpellings), row_values(param::kSshCheck));
  EXPECT_EQ(spelled(launch::kFabricBackendSpellings), row_values(param::kCheck));
  EXPECT_EQ(spelled(launch::kMpiWantedSpellings), row_values(param::kMpi));
  EXPECT_EQ(spelled(launch::kStatusModeSpellings), row_values(param::kStatus));
  EXPECT_EQ(spelled(launch::kEventsModeSpellings), row_values(param::kEvents));
  EXPECT_EQ(spelled(init::kRoleSpellings), row_values(param::kRole));
  EXPECT_EQ(spelled(init::kSshServerSpellings), row_values(param::kSshServer));
  EXPECT_EQ(spelled(log::kLogFormatSpellings), row_values(param::kLogFormat));
  EXPECT_EQ(spelled(check::kBackendSpellings), row_values(param::kBackend));
}

TEST(Choices, EveryValueOfATableHasItsOwnSpelling) {
  for (const auto& spelling : launch::kFabricBackendSpellings) {
    EXPECT_EQ(choice_name(spelling.value, launch::kFabricBackendSpellings), spelling.name);
    EXPECT_EQ(choice_value(spelling.name, launch::kFabricBackendSpellings), spelling.value);
  }
  EXPECT_FALSE(choice_value("NCCL", launch::kFabricBackendSpellings).has_value());
}

TEST(Choices, ParamsReadsTheValueGivenByFlagOrVariableAsItsEnum) {
  auto by_default = Params::parse(kScopeLauncher, {}, {});
  ASSERT_TRUE(by_default);
  EXPECT_EQ(by_default->choice(param::kWait, launch::kWaitForSpellings), launch::WaitFor::kSidecar);
  EXPECT_EQ(by_default->choice(param::kCheck, launch::kFabricBackendSpellings), launch::FabricBackend::kNone);

  auto by_flag = Params::parse(kScopeLauncher, {"--wait", "ssh", "--check", "auto"}, {});
  ASSERT_TRUE(by_flag);
  EXPECT_EQ(by_flag->choice(param::kWait, launch::kWaitForSpellings), launch::WaitFor::kSsh);
  EXPECT_EQ(by_flag->choice(param::kCheck, launch::kFabricBackendSpellings), launch::FabricBackend::kAuto);

  auto by_variable = Params::parse(kScopeLauncher, {}, {{"TMPI_PLACEMENT", "probe"}});
  ASSERT_TRUE(by_variable);
  EXPECT_EQ(by_variable->choice(param::kPlacement, launch::kPlacementCheckSpellings),
            launch::PlacementCheck::kProbe);

  // A value outside the row never reaches the readers: parse() refuses it, naming the flag.
  auto refused = Params::parse(kScopeLauncher, {"--wait", "forever"}, {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("--wait"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace tmpi

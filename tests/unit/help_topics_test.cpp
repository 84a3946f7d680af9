// `mpi-launcher help TOPIC` (launcher/help_topics.h): every troubleshooting key that a failure's
// reason can end with has its section, compiled in from docs/troubleshooting.md itself; the
// exit codes are a topic; an unknown topic is none; a section ends where the next begins.
#include "launcher/help_topics.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "launcher/trouble_keys.h"

namespace tmpi::launch {
namespace {

TEST(HelpTopics, EveryTroubleKeyHasItsSectionOfThePage) {
  for (const TroubleEntry& entry : kTroubleTable) {
    std::optional<std::string> text = help_topic(entry.key);
    ASSERT_TRUE(text) << entry.key;
    EXPECT_EQ(text->rfind("## " + std::string(entry.key) + "\n", 0), 0u) << *text;
    EXPECT_NE(text->find("**Symptom**"), std::string::npos) << entry.key;
    EXPECT_NE(text->find("**Fix**"), std::string::npos) << entry.key;
    EXPECT_EQ(text->find("\n## "), std::string::npos) << entry.key << ": one section, not the next too";
    EXPECT_NE(help_topics().find(std::string(entry.key)), std::string::npos) << "listed: " << entry.key;
  }
  EXPECT_EQ(help_topic("exit-codes"), exit_codes_markdown());
  EXPECT_EQ(help_topic("bogus"), std::nullopt);
  EXPECT_EQ(help_topic(""), std::nullopt);
  EXPECT_EQ(help_topic("host"), std::nullopt) << "a prefix of a key is no key";
}

TEST(HelpTopics, ASectionRunsFromItsHeadingToTheNext) {
  const std::string page = "# Title\n\n## a\n\none\n\n## ab\n\ntwo\n## c\nthree";
  EXPECT_EQ(markdown_section(page, "a"), "## a\n\none\n\n");
  EXPECT_EQ(markdown_section(page, "ab"), "## ab\n\ntwo\n");
  EXPECT_EQ(markdown_section(page, "c"), "## c\nthree") << "the last runs to the page's end";
  EXPECT_EQ(markdown_section("## a\nfirst\n## b\n", "a"), "## a\nfirst\n") << "a heading on the first line";
  EXPECT_EQ(markdown_section(page, "b"), std::nullopt);
  EXPECT_EQ(markdown_section(page, "Title"), std::nullopt) << "only second-level headings";
}

}  // namespace
}  // namespace tmpi::launch

// See help_topics.h. The page's text is docs/troubleshooting.md as the build read it
// (launcher/CMakeLists.txt generates troubleshooting_page.h), so the help and the page cannot
// differ; unit_tests' HelpTopics.* hold every key of trouble_keys.h to a section.
#include "launcher/help_topics.h"

#include <fmt/format.h>

#include "common/error.h"
#include "launcher/trouble_keys.h"
#include "launcher/troubleshooting_page.h"

namespace tmpi::launch {

std::optional<std::string> markdown_section(std::string_view page, std::string_view key) {
  const std::string heading = "## " + std::string(key) + "\n";
  std::size_t at = page.starts_with(heading) ? 0 : page.find("\n" + heading);
  if (at == std::string_view::npos) return std::nullopt;
  if (at != 0) ++at;  // past the newline before the heading
  std::size_t end = page.find("\n## ", at + heading.size());
  std::string_view section = page.substr(at, end == std::string_view::npos ? page.size() - at : end - at + 1);
  return std::string(section);
}

std::optional<std::string> help_topic(std::string_view topic) {
  if (topic == "exit-codes") return exit_codes_markdown();
  for (const TroubleEntry& entry : kTroubleTable) {
    if (entry.key == topic) return markdown_section(kTroubleshootingPage, entry.key);
  }
  return std::nullopt;
}

std::string help_topics() {
  std::string out =
      "mpi-launcher help TOPIC, where TOPIC is the key a failure's reason ends with "
      "(\"see docs/troubleshooting.md#KEY\"), or exit-codes:\n";
  for (const TroubleEntry& entry : kTroubleTable) out += fmt::format("  {:<22} {}\n", entry.key, entry.title);
  out += fmt::format("  {:<22} {}\n", "exit-codes", "what each exit code of the programs means");
  return out;
}

}  // namespace tmpi::launch

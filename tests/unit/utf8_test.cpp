// common/utf8.h, and every cut of outside text that goes through it on its way into JSON:
// a cut inside a multi-byte character must never make valid text invalid, since dumping
// invalid UTF-8 throws, and on the status reporter's or the Events' thread that throw once
// terminated the launcher. Each case cuts at every byte of the
// characters it holds, so no split point is left untried.
#include "common/utf8.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "launcher/job_events.h"
#include "status/trainer_status.h"

namespace tmpi {
namespace {

// Whether `text` is all well-formed UTF-8 sequences.
bool valid(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t length = utf8_sequence_at(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

// 2, 3 and 4 byte characters: é (U+00E9), 中 (U+4E2D), 🙂 (U+1F642).
const std::string kMixed = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x99\x82z";

TEST(Utf8, ACutNeverSplitsACharacter) {
  for (std::size_t max = 0; max <= kMixed.size(); ++max) {
    std::string cut = truncate_utf8(kMixed, max);
    EXPECT_LE(cut.size(), max);
    EXPECT_TRUE(valid(cut)) << "cut at " << max;
    EXPECT_EQ(kMixed.rfind(cut, 0), 0U) << "a prefix, cut at " << max;
    // The longest such prefix: one more character would not fit.
    if (cut.size() < kMixed.size()) {
      EXPECT_GT(cut.size() + utf8_sequence_at(kMixed, cut.size()), max);
    }
  }
}

TEST(Utf8, AnEllipsisFitsWithinTheSameBound) {
  for (std::size_t max = 3; max <= kMixed.size() + 2; ++max) {
    std::string cut = truncate_utf8(kMixed, max, "...");
    EXPECT_LE(cut.size(), max) << max;
    EXPECT_TRUE(valid(cut)) << max;
    if (max < kMixed.size()) {
      EXPECT_EQ(cut.substr(cut.size() - 3), "...") << max;
    }
  }
  EXPECT_EQ(truncate_utf8(kMixed, kMixed.size(), "..."), kMixed);  // not cut: no ellipsis
}

TEST(Utf8, ALastPartNeverBeginsInsideACharacter) {
  for (std::size_t max = 3; max <= kMixed.size() + 2; ++max) {
    std::string cut = last_utf8(kMixed, max, "...");
    EXPECT_LE(cut.size(), max) << max;
    EXPECT_TRUE(valid(cut)) << max;
    if (max < kMixed.size()) {
      EXPECT_EQ(cut.substr(0, 3), "...") << max;
      EXPECT_EQ(kMixed.substr(kMixed.size() - (cut.size() - 3)), cut.substr(3)) << "a suffix, " << max;
    }
  }
  EXPECT_EQ(last_utf8(kMixed, kMixed.size(), "..."), kMixed);
}

TEST(Utf8, InvalidBytesAreReplacedAndDumpNeverThrows) {
  std::string bad =
      "ok\xFF\xC3(\xED\xA0\x80\xF4\x90\x80\x80";  // a stray byte, a cut pair, a surrogate, > U+10FFFF
  EXPECT_FALSE(valid(bad));
  EXPECT_TRUE(valid(valid_utf8(bad)));
  EXPECT_EQ(valid_utf8(bad).rfind("ok\xEF\xBF\xBD", 0), 0U);  // U+FFFD in place of the stray byte
  EXPECT_EQ(valid_utf8(kMixed), kMixed);
  nlohmann::json document = {{"command", {bad, kMixed}}};
  std::string dumped;
  EXPECT_NO_THROW(dumped = dump_json(document));
  EXPECT_TRUE(valid(dumped));
  EXPECT_NE(dumped.find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(Utf8, JsonBytesAreCountedAsTheyAreWrittenAndCutWhole) {
  EXPECT_EQ(json_string_bytes("ab"), 2U);
  EXPECT_EQ(json_string_bytes("\"\\\n\t"), 8U);
  EXPECT_EQ(json_string_bytes("\x1b"), 6U);  // \u001b
  EXPECT_EQ(json_string_bytes("\xFF"), 3U);  // U+FFFD
  EXPECT_EQ(json_string_bytes(kMixed), kMixed.size());
  for (const std::string& text : {std::string(300, '\x1b'), std::string(300, '"'),
                                  kMixed + std::string(50, '\x01'), std::string(100, '\xFF') + kMixed}) {
    EXPECT_EQ(json_string_bytes(text), dump_json(nlohmann::json(text)).size() - 2);  // less the quotes
    for (std::size_t max = 0; max < json_string_bytes(text) + 4; ++max) {
      std::string cut = truncate_json(text, max, "...");
      EXPECT_LE(json_string_bytes(cut), max) << max;
      EXPECT_LE(dump_json(nlohmann::json(cut)).size(), max + 2) << max;
      if (json_string_bytes(text) <= max) {
        EXPECT_EQ(cut, text);
      }
    }
  }
}

// The TrainJob status cuts a text to 64 bytes: with multi-byte text, at every offset.
TEST(Utf8, TheStatusCutsMultiByteTextWhole) {
  for (std::size_t lead = 0; lead < 8; ++lead) {
    status::JobHealth health;
    health.phase = "Failed";
    health.exit_code = 3;
    health.first_failure = std::string(lead, 'x');
    for (int i = 0; i < 20; ++i) health.first_failure += kMixed;
    auto body = status::status_body(health, std::chrono::system_clock::now());
    std::string dumped;
    ASSERT_NO_THROW(dumped = body.dump()) << "lead " << lead;  // the throwing dump, on purpose
    for (const auto& metric : body["trainerStatus"]["metrics"]) {
      std::string value = metric["value"];
      EXPECT_LE(value.size(), status::kMaxMetricText);
      EXPECT_TRUE(valid(value)) << metric["name"];
    }
  }
}

// An Event's message is cut to 1024 bytes: the same at every offset.
TEST(Utf8, AnEventCutsMultiByteTextWhole) {
  for (std::size_t lead = 0; lead < 8; ++lead) {
    std::string message(lead, 'x');
    while (message.size() < 3000) message += kMixed;
    auto event = launch::event_body({"ns", "tj", "uid"}, "Warning", "RankFailed", message, "l",
                                    std::chrono::system_clock::now());
    ASSERT_NO_THROW((void)event.dump()) << "lead " << lead;
    std::string cut = event["message"];
    EXPECT_LE(cut.size(), 1024U);
    EXPECT_TRUE(valid(cut)) << "lead " << lead;
    EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  }
}

}  // namespace
}  // namespace tmpi

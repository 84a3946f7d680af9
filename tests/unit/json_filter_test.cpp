// parse_json_filtered: pruning to kept paths (with "*" and "[]"), streaming an array's
// elements, stopping from the visitor, syntax errors (with their byte) anywhere in the
// text, skipped parts included, numbers typed as nlohmann types them, and escapes.
#include "common/json_filter.h"

#include <gtest/gtest.h>

namespace tmpi {
namespace {

using nlohmann::json;

const char* kDoc = R"({"kind":"List","items":[
  {"metadata":{"name":"a","labels":{"x":"1","y":"2"},"uid":"u1"},"spec":{"big":[1,2,{"deep":true}]}},
  {"metadata":{"name":"b","labels":{}},"status":{"podIP":"10.0.0.2"}}]})";

TEST(JsonFilter, KeepsOnlyNamedPaths) {
  std::string error;
  json doc = parse_json_filtered(
      kDoc, {{"items", "[]", "metadata", "name"}, {"items", "[]", "metadata", "labels", "*"}}, &error);
  ASSERT_FALSE(doc.is_discarded()) << error;
  json expected = json::parse(R"({"items":[{"metadata":{"name":"a","labels":{"x":"1","y":"2"}}},
                                           {"metadata":{"name":"b","labels":{}}}]})");
  EXPECT_EQ(doc, expected) << doc.dump();
}

TEST(JsonFilter, StreamsElementsWithoutKeepingThem) {
  std::vector<std::string> seen;
  JsonStream stream{{"items"}, [&](json&& item, std::size_t index) {
                      seen.push_back(std::to_string(index) + item["metadata"]["name"].get<std::string>());
                      return true;
                    }};
  json doc = parse_json_filtered(kDoc, {{"items", "[]", "metadata", "name"}, {"kind"}}, nullptr, &stream);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(seen, (std::vector<std::string>{"0a", "1b"}));
  EXPECT_EQ(doc, json::parse(R"({"kind":"List","items":[]})"));
}

TEST(JsonFilter, VisitorCanStopTheParse) {
  int calls = 0;
  JsonStream stream{{"items"}, [&](json&&, std::size_t) { return ++calls < 1; }};
  std::string error;
  json doc = parse_json_filtered(kDoc, {{"items", "[]", "metadata", "name"}}, &error, &stream);
  EXPECT_TRUE(doc.is_discarded());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(error.empty());
}

TEST(JsonFilter, SyntaxErrorsCarryThePosition) {
  std::string error;
  EXPECT_TRUE(parse_json_filtered(R"({"items": [1, ])", {{"items"}}, &error).is_discarded());
  EXPECT_NE(error.find("syntax error at byte 15, line 1, column 16"), std::string::npos) << error;
  EXPECT_TRUE(parse_json_filtered("", {{"items"}}, &error).is_discarded());
  EXPECT_NE(error.find("syntax error at byte 0"), std::string::npos) << error;
  EXPECT_TRUE(parse_json_filtered("{\n \"items\": [1 2]}", {{"items"}}, &error).is_discarded());
  EXPECT_NE(error.find("at byte 15, line 2, column 14"), std::string::npos) << error;
}

// Each of these was refused by nlohmann's parser, and must stay refused, with the byte
// named, wherever it stands: simdjson's On Demand API alone would skip over most of them.
TEST(JsonFilter, EveryPartIsCheckedSkippedOnesToo) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"skip\": \"a\xff\", \"items\": []}", "byte 11"},  // not UTF-8
      {"{\"skip\": \"a\x01\", \"items\": []}", "byte 11"},  // a control character
      {R"({"skip": "\q", "items": []})", "byte 9"},         // an unknown escape
      {R"({"skip": "\ud800", "items": []})", "byte 9"},     // a lone surrogate
      {R"({"skip": [1 2], "items": []})", "byte 12"},       // a missing comma
      {R"({"skip": {"a" 1}, "items": []})", "byte 14"},     // a missing colon
      {R"({"skip": tru, "items": []})", "byte 9"},
      {R"({"skip": nul, "items": []})", "byte 9"},
      {R"({"skip": 01, "items": []})", "byte 9"},
      {R"({"skip": 1e400, "items": []})", "byte 9"},  // beyond a double, as nlohmann said
      {R"({"skip": "open)", "byte 9"},                // an unclosed string
      {R"({"items": []} {"items": []})", "byte 14"},  // trailing content
      {R"("pods" "more")", "byte 7"},
  };
  for (const auto& [text, where] : bad) {
    std::string error;
    EXPECT_TRUE(parse_json_filtered(text, {{"items"}}, &error).is_discarded()) << text;
    EXPECT_NE(error.find("syntax error at " + where), std::string::npos) << text << ": " << error;
  }
  std::string deep = std::string(2000, '[') + std::string(2000, ']');
  std::string error;
  EXPECT_TRUE(parse_json_filtered(deep, {{"items"}}, &error).is_discarded());
  EXPECT_NE(error.find("nested deeper than 1024"), std::string::npos) << error;
}

TEST(JsonFilter, NumbersAndEscapesAsNlohmannReadsThem) {
  const char* text = R"({"k": {"u": 8, "i": -3, "f": 2.5, "big": 123456789012345678901234,
                              "esc\u0061ped": "caf\u00e9 \"q\"", "plain": "x/y"}})";
  std::string error;
  json doc = parse_json_filtered(text, {{"k", "*"}}, &error);
  ASSERT_FALSE(doc.is_discarded()) << error;
  EXPECT_EQ(doc, json::parse(text));
  EXPECT_TRUE(doc["k"]["u"].is_number_unsigned());
  EXPECT_TRUE(doc["k"]["i"].is_number_integer());
  EXPECT_TRUE(doc["k"]["big"].is_number_float());
  EXPECT_EQ(doc["k"]["escaped"], "caf\u00e9 \"q\"");
}

TEST(JsonFilter, ScalarDocumentsAndPaddedText) {
  EXPECT_EQ(parse_json_filtered(" \"s\" ", {{"items"}}), json("s"));
  EXPECT_EQ(parse_json_filtered("null", {{"items"}}), json(nullptr));
  EXPECT_EQ(parse_json_filtered(PaddedText::copy(kDoc), {{"kind"}}), json::parse(R"({"kind":"List"})"));
}

TEST(JsonFilter, ScalarWhereAContainerIsExpectedIsKept) {
  json doc = parse_json_filtered(R"({"items": 5})", {{"items", "[]", "metadata"}});
  EXPECT_EQ(doc, json::parse(R"({"items": 5})"));
}

}  // namespace
}  // namespace tmpi

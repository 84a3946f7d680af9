// parse_json_filtered: pruning to kept paths (with "*" and "[]"), streaming an array's
// elements, stopping from the visitor, and syntax errors.
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
  EXPECT_NE(error.find("syntax error"), std::string::npos) << error;
  EXPECT_TRUE(parse_json_filtered("", {{"items"}}, &error).is_discarded());
}

TEST(JsonFilter, ScalarWhereAContainerIsExpectedIsKept) {
  json doc = parse_json_filtered(R"({"items": 5})", {{"items", "[]", "metadata"}});
  EXPECT_EQ(doc, json::parse(R"({"items": 5})"));
}

}  // namespace
}  // namespace tmpi

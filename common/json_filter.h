// Parses JSON keeping only the paths a caller names, with simdjson's On Demand API: its
// first stage finds every structural character of the text at gigabytes a second (SIMD),
// and the walk then builds nlohmann values only for the kept paths. A 10,000-pod list is
// ~35 MB of which mpi-init needs ~2%; building the whole DOM costs 7x the input in memory
// and seconds of time; a filter on nlohmann's SAX parser took ~0.4 s, its lexer most of
// it; this takes ~0.15 s, at ~2x the input in memory with the text (bench/rows/mpi_init.sh).
//
// The text is checked whole, as nlohmann's parser did: UTF-8, every string's escapes,
// every number and literal, the commas and colons of skipped subtrees too. An error names
// the byte where it was found (and its line and column), never throws, never aborts.
//
// A path is a list of keys from the root; "[]" stands for any array element and "*" for
// any key: {"items", "[]", "metadata", "labels", "*"}. The result has the same shape as
// the input, pruned to the named paths (and the containers on the way to them).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace tmpi {

using JsonPath = std::vector<std::string>;

// Optional streaming of one array's elements: each element of the array at `array` (say
// {"items"}) goes, pruned, to `visit` as soon as it is complete, and is not kept, so memory
// follows one element, not the whole list. `visit` returns false to stop the parse.
struct JsonStream {
  JsonPath array;
  std::function<bool(nlohmann::json&& element, std::size_t index)> visit;
};

// Returns the pruned document, or a discarded value (is_discarded()) on a syntax error or
// when `visit` stopped the parse; `error` then holds the message ("syntax error at byte N
// (line L, column C): ..."), or stays empty for a stop. Documents nest at most
// kMaxJsonDepth deep.
inline constexpr std::size_t kMaxJsonDepth = 1024;
nlohmann::json parse_json_filtered(const PaddedText& text, const std::vector<JsonPath>& keep,
                                   std::string* error = nullptr, const JsonStream* stream = nullptr);
// The same for text without the padding simdjson reads past its end: parsed from a copy.
nlohmann::json parse_json_filtered(std::string_view text, const std::vector<JsonPath>& keep,
                                   std::string* error = nullptr, const JsonStream* stream = nullptr);

}  // namespace tmpi

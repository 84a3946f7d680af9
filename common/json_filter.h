// Parses JSON keeping only the paths a caller names, through nlohmann's SAX interface.
// A 10,000-pod list is ~35 MB of which mpi-init needs ~2%; building the whole DOM costs
// 7x the input in memory and seconds of time, this costs neither (bench/rows/mpi_init.sh).
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
// when `visit` stopped the parse; `error` then holds the parser's message (with its byte
// position), or stays empty for a stop.
nlohmann::json parse_json_filtered(std::string_view text, const std::vector<JsonPath>& keep,
                                   std::string* error = nullptr, const JsonStream* stream = nullptr);

}  // namespace tmpi

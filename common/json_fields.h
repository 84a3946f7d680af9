// Fields of a JSON document that came from outside (a coordinator's reply, the Kubernetes
// API, a file), read without exceptions. nlohmann's value() and get() throw when a field
// has another type than asked, or when the document is not an object at all (a proxy's 503
// page, a 200 with "[]"); on a thread, that throw became std::terminate. Each reader here
// gives the fallback instead, and bodies are checked for shape before any field is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tmpi {

// `text` parsed, if it is a JSON object; else an empty object (never a discarded value).
nlohmann::json parse_object(std::string_view text);

// The node at `pointer` ("/metadata/uid"), or nullptr when absent or `doc` has no such path.
const nlohmann::json* node_at(const nlohmann::json& doc, std::string_view pointer);

// The value at `pointer` when it has the asked type (an integer within int64 for int_at),
// else `fallback`.
std::string string_at(const nlohmann::json& doc, std::string_view pointer, std::string fallback = {});
std::int64_t int_at(const nlohmann::json& doc, std::string_view pointer, std::int64_t fallback);
double number_at(const nlohmann::json& doc, std::string_view pointer, double fallback);
bool bool_at(const nlohmann::json& doc, std::string_view pointer, bool fallback);

}  // namespace tmpi

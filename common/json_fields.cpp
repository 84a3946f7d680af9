// See json_fields.h.
#include "common/json_fields.h"

#include <cstdint>
#include <utility>

namespace tmpi {

using nlohmann::json;

json parse_object(std::string_view text) {
  json parsed = json::parse(text.begin(), text.end(), nullptr, false);
  return parsed.is_object() ? parsed : json::object();
}

// A pointer is walked by hand ("/a/b/0"), so that no malformed step can throw.
const json* node_at(const json& doc, std::string_view pointer) {
  const json* node = &doc;
  while (!pointer.empty()) {
    if (pointer.front() != '/') return nullptr;
    pointer.remove_prefix(1);
    std::size_t slash = pointer.find('/');
    std::string step(pointer.substr(0, slash));
    pointer = slash == std::string_view::npos ? std::string_view{} : pointer.substr(slash);
    for (std::size_t at = step.find('~'); at != std::string::npos; at = step.find('~', at + 1)) {
      if (at + 1 < step.size() && step[at + 1] == '1')
        step.replace(at, 2, "/");
      else if (at + 1 < step.size() && step[at + 1] == '0')
        step.replace(at, 2, "~");
    }
    if (node->is_object()) {
      auto it = node->find(step);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else if (node->is_array()) {
      if (step.empty() || step.size() > 9 || step.find_first_not_of("0123456789") != std::string::npos)
        return nullptr;
      std::size_t index = std::stoul(step);
      if (index >= node->size()) return nullptr;
      node = &(*node)[index];
    } else {
      return nullptr;
    }
  }
  return node;
}

std::string string_at(const json& doc, std::string_view pointer, std::string fallback) {
  const json* node = node_at(doc, pointer);
  return node != nullptr && node->is_string() ? node->get<std::string>() : std::move(fallback);
}

std::int64_t int_at(const json& doc, std::string_view pointer, std::int64_t fallback) {
  const json* node = node_at(doc, pointer);
  if (node == nullptr) return fallback;
  if (!node->is_number_integer()) return fallback;
  if (node->is_number_unsigned() && node->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    return fallback;
  return node->get<std::int64_t>();
}

double number_at(const json& doc, std::string_view pointer, double fallback) {
  const json* node = node_at(doc, pointer);
  return node != nullptr && node->is_number() ? node->get<double>() : fallback;
}

bool bool_at(const json& doc, std::string_view pointer, bool fallback) {
  const json* node = node_at(doc, pointer);
  return node != nullptr && node->is_boolean() ? node->get<bool>() : fallback;
}

}  // namespace tmpi

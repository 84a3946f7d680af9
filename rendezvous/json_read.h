// Strict readers of a field of a JSON object that came off the wire, shared by the parse of
// the requests and of the answers (protocol.h): a field of another type, or an integer out
// of range, is a wrong shape, never an exception and never a silent default.
#pragma once

#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace tmpi::rdv::wire {

using nlohmann::json;

// Field readers for a body known to be an object: false when the field is there with
// another type, or missing where `required`.
inline bool read(const json& body, const char* name, std::string& out, bool required) {
  auto it = body.find(name);
  if (it == body.end()) return !required;
  if (!it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}
template <typename Int>
bool read(const json& body, const char* name, Int& out, bool required) {
  auto it = body.find(name);
  if (it == body.end()) return !required;
  if (!it->is_number_integer()) return false;
  long long value = it->get<long long>();
  if (value < static_cast<long long>(std::numeric_limits<Int>::min()) ||
      value > static_cast<long long>(std::numeric_limits<Int>::max())) {
    return false;
  }
  out = static_cast<Int>(value);
  return true;
}
inline bool read(const json& body, const char* name, bool& out, bool required) {
  auto it = body.find(name);
  if (it == body.end()) return !required;
  if (!it->is_boolean()) return false;
  out = it->get<bool>();
  return true;
}
inline bool read(const json& body, const char* name, double& out, bool required) {
  auto it = body.find(name);
  if (it == body.end()) return !required;
  if (!it->is_number()) return false;
  out = it->get<double>();
  return true;
}

}  // namespace tmpi::rdv::wire

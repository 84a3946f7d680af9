// Choices as enums. A choice parameter's row spells its values once ("sidecar|ssh|none",
// param_table.cpp), and Params::parse refuses any other; the code that acts on the value
// takes an enum, read once at the edge (Params::choice) through a table of the enum's
// spellings that stands beside the enum. tests/unit/choice_test.cpp holds every such table
// against its row, value for value and in order, so that an enum and its row cannot drift
// apart, and nothing below the edge compares a choice as a string.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace tmpi {

template <typename E>
struct Spelling {
  std::string_view name;
  E value;
};

template <typename E, std::size_t N>
using Spellings = std::array<Spelling<E>, N>;

template <typename E, std::size_t N>
constexpr std::optional<E> choice_value(std::string_view name, const Spellings<E, N>& spellings) {
  for (const auto& spelling : spellings) {
    if (spelling.name == name) return spelling.value;
  }
  return std::nullopt;
}

// The spelling of a value, as the row and the command lines that pass it on write it.
template <typename E, std::size_t N>
constexpr std::string_view choice_name(E value, const Spellings<E, N>& spellings) {
  for (const auto& spelling : spellings) {
    if (spelling.value == value) return spelling.name;
  }
  return {};
}

}  // namespace tmpi

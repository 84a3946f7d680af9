// `mpi-launcher help [TOPIC]`: the long texts a person in a failed job's pod needs, with no
// docs at hand, as `mpirun --help TOPIC` and PRRTE's keyed help give them. A topic is a key
// of docs/troubleshooting.md (the key that every failure's reason ends with: trouble_keys.h),
// whose section is compiled in from the page itself, or `exit-codes`. Pure: main.cpp prints.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tmpi::launch {

// The topic's text, or nullopt for none of that name.
std::optional<std::string> help_topic(std::string_view topic);

// Every topic, one a line with its title, for `mpi-launcher help` alone and for a topic unknown.
std::string help_topics();

// The section `## KEY` of a page of markdown (to the next `## `), or nullopt.
std::optional<std::string> markdown_section(std::string_view page, std::string_view key);

}  // namespace tmpi::launch

// The one parameter registry (docs/design.md, Parameters), in the spirit of NCCL's NCCL_PARAM: every
// setting of every binary is one row of one table (param_table.cpp), with a flag
// (--name), an environment variable (TMPI_NAME), a default and a one-line description.
// --help and the README's parameter table are generated from that table. Code names a
// parameter by its typed handle (param_names.h: param::kSshPort), never by a string.
//
// Precedence: flag, then TMPI_ variable, then default. Every value is checked and parsed
// once, in parse(), against its row (type, choices, range): an unparsable or out-of-range
// value is an Exit::kUsage error that names the flag or the variable. The readers then
// only hand out what parse() stored; none can fail. Only the edge (the main.cpp files)
// reads Params: library code takes its own options struct.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/choice.h"
#include "common/error.h"
#include "common/param_names.h"

namespace tmpi {

// Which command reads a parameter; a row may belong to several.
enum Scope : unsigned {
  kScopeInit = 1U << 0,        // mpi-init
  kScopeRendezvous = 1U << 1,  // mpi-rendezvous
  kScopeLauncher = 1U << 2,    // mpi-launcher
  kScopeCheck = 1U << 3,       // nccl-check
  kScopeSshd = 1U << 4,        // mpi-sshd
  kScopeRank = 1U << 5,        // mpi-rank (what agent/contract.h hands it, and the log's)
  kScopeConvert = 1U << 6,     // mpi-launcher convert
  kScopeAll = ~0U,
};

struct ParamSpec {
  std::size_t index;         // the handle's place: param_names.h
  std::string_view name;     // "ssh-dir": flag --ssh-dir, variable TMPI_SSH_DIR
  std::string_view metavar;  // "DIR" in --help
  ParamType type;
  std::string_view default_value;  // "" = unset; "$HOME" is expanded
  std::string_view help;           // one line
  unsigned scopes;
  std::string_view choices = {};  // kChoice: "a|b|c"
  // kInt: the values allowed (a port of 70000 is an error, not port 4464); kDuration: the same
  // in milliseconds (a beat interval of 0 would make every agent beat back to back). Set with
  // ranged(); every duration has a range (param_table.cpp checks it when it compiles).
  long long min = std::numeric_limits<long long>::min();
  long long max = std::numeric_limits<long long>::max();
};

// A row of the table, named and typed by its handle.
template <ParamType T>
constexpr ParamSpec row(Param<T> handle, std::string_view metavar, std::string_view default_value,
                        std::string_view help, unsigned scopes, std::string_view choices = {}) {
  return ParamSpec{handle.index, handle.name, metavar, T, default_value, help, scopes, choices};
}

// `spec` with its kInt values bounded to [min, max].
constexpr ParamSpec ranged(ParamSpec spec, long long min, long long max) {
  spec.min = min;
  spec.max = max;
  return spec;
}

// `spec` with its kDuration values bounded to [min, max].
constexpr ParamSpec ranged(ParamSpec spec, std::chrono::milliseconds min, std::chrono::milliseconds max) {
  return ranged(spec, static_cast<long long>(min.count()), static_cast<long long>(max.count()));
}

// "1500ms", "90s", "2h": the shortest exact spelling of a duration, for messages and --help.
std::string format_duration(std::chrono::milliseconds duration);

// The table itself (param_table.cpp).
std::span<const ParamSpec> param_table();

std::string env_name(std::string_view param_name);  // "ssh-dir" -> "TMPI_SSH_DIR"

class Params {
 public:
  // args: argv without argv[0]; anything after "--" lands in rest(). env: the
  // environment (only TMPI_ names are read).
  static Expected<Params> parse(unsigned scope, const std::vector<std::string>& args,
                                const std::map<std::string, std::string>& env);

  // Each reader takes only a handle of its own type. A parameter outside the command's
  // scope reads as its default, never set.
  template <ParamType T>
  requires(T == ParamType::kString || T == ParamType::kPath ||
           T == ParamType::kChoice) const std::string& str(Param<T> handle) const {
    return values_[handle.index].text;
  }
  // A choice as its enum (common/choice.h). parse() took only the row's values, and a unit test
  // holds each table of spellings against its row, so the first entry is never the fallback.
  template <typename E, std::size_t N>
  E choice(Param<ParamType::kChoice> handle, const Spellings<E, N>& spellings) const {
    return choice_value(values_[handle.index].text, spellings).value_or(spellings.front().value);
  }
  std::int64_t integer(Param<ParamType::kInt> handle) const { return values_[handle.index].integer; }
  double number(Param<ParamType::kNumber> handle) const { return values_[handle.index].number; }
  std::uint64_t bytes(Param<ParamType::kBytes> handle) const { return values_[handle.index].bytes; }
  std::chrono::milliseconds duration(Param<ParamType::kDuration> handle) const {
    return values_[handle.index].duration;
  }
  bool flag(Param<ParamType::kBool> handle) const { return values_[handle.index].flag; }
  // Comma-split, and repeatable on the command line.
  const std::vector<std::string>& list(Param<ParamType::kList> handle) const {
    return values_[handle.index].list;
  }
  // Given as a flag or a variable.
  bool is_set(ParamRef handle) const { return values_[handle.index].given; }
  // The value as it was given (or the default), whatever its type: to pass it on.
  const std::string& text(ParamRef handle) const { return values_[handle.index].text; }

  bool help_requested() const { return help_; }
  const std::vector<std::string>& positional() const { return positional_; }
  const std::vector<std::string>& rest() const { return rest_; }
  // "name=value (from TMPI_NAME)" for each setting the environment supplied.
  const std::vector<std::string>& env_overrides() const { return env_overrides_; }

 private:
  // A value as parsed once, by its row's type; the other fields stay zero.
  struct Value {
    std::string text;
    bool given = false;
    std::int64_t integer = 0;
    double number = 0;
    std::uint64_t bytes = 0;
    std::chrono::milliseconds duration{0};
    bool flag = false;
    std::vector<std::string> list;
  };
  static Value parsed(const ParamSpec& spec, std::string text, bool given);

  std::array<Value, kParamCount> values_;
  std::vector<std::string> positional_, rest_, env_overrides_;
  bool help_ = false;
};

// Validates one value against its spec; `where` names the flag or variable in errors.
Status validate_param(const ParamSpec& spec, std::string_view value, std::string_view where);
Expected<std::chrono::milliseconds> parse_duration(std::string_view text);
Expected<double> parse_number(std::string_view text);
Expected<std::uint64_t> parse_bytes(std::string_view text);

std::string help_text(std::string_view synopsis, unsigned scope);
std::string markdown_table();
std::map<std::string, std::string> current_environment();

}  // namespace tmpi

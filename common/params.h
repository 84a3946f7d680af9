// The one parameter registry (docs/design.md, Parameters), in the spirit of NCCL's NCCL_PARAM: every
// setting of every binary is one row of one table (param_table.cpp), with a flag
// (--name), an environment variable (TMPI_NAME), a default and a one-line description.
// --help and the README's parameter table are generated from that table.
//
// Precedence: flag, then TMPI_ variable, then default. Values are validated when parsed,
// so an unparsable value is an Exit::kUsage error that names the flag or the variable.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tmpi {

// kNumber: a decimal (0.5, 12.5); kBytes: a size with an optional K, M or G suffix (powers
// of 1024, as nccl-tests reads -b and -e).
enum class ParamType { kString, kPath, kInt, kNumber, kBytes, kDuration, kBool, kChoice, kList };

// Which command reads a parameter; a row may belong to several.
enum Scope : unsigned {
  kScopeInit = 1U << 0,        // mpi-init
  kScopeRendezvous = 1U << 1,  // mpi-rendezvous
  kScopeLauncher = 1U << 2,    // mpi-launcher
  kScopeCheck = 1U << 3,       // nccl-check
  kScopeAll = ~0U,
};

struct ParamSpec {
  std::string_view name;     // "ssh-dir": flag --ssh-dir, variable TMPI_SSH_DIR
  std::string_view metavar;  // "DIR" in --help
  ParamType type;
  std::string_view default_value;  // "" = unset; "$HOME" is expanded
  std::string_view help;           // one line
  unsigned scopes;
  std::string_view choices = {};  // kChoice: "a|b|c"
  // kInt: the values allowed, checked where the value is read (a port of 70000 is an error,
  // not port 4464). Set with ranged().
  long long min = std::numeric_limits<long long>::min();
  long long max = std::numeric_limits<long long>::max();
};

// `spec` with its kInt values bounded to [min, max].
constexpr ParamSpec ranged(ParamSpec spec, long long min, long long max) {
  spec.min = min;
  spec.max = max;
  return spec;
}

// The table itself (param_table.cpp).
std::span<const ParamSpec> param_table();

std::string env_name(std::string_view param_name);  // "ssh-dir" -> "TMPI_SSH_DIR"

class Params {
 public:
  // args: argv without argv[0]; anything after "--" lands in rest(). env: the
  // environment (only TMPI_ names are read).
  static Expected<Params> parse(unsigned scope, const std::vector<std::string>& args,
                                const std::map<std::string, std::string>& env);

  const std::string& str(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  double number(std::string_view name) const;
  std::uint64_t bytes(std::string_view name) const;
  std::chrono::milliseconds duration(std::string_view name) const;
  bool flag(std::string_view name) const;
  std::vector<std::string> list(std::string_view name) const;  // comma-split, repeatable
  bool is_set(std::string_view name) const;                    // given as a flag or a variable

  bool help_requested() const { return help_; }
  const std::vector<std::string>& positional() const { return positional_; }
  const std::vector<std::string>& rest() const { return rest_; }
  // "name=value (from TMPI_NAME)" for each setting the environment supplied.
  const std::vector<std::string>& env_overrides() const { return env_overrides_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, bool, std::less<>> set_;
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

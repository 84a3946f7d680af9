// --help and the README's parameter table, both generated from param_table(), so that
// neither can drift from what the code reads. tests/unit/params_test checks that the
// README holds exactly markdown_table().
#include <fmt/format.h>

#include "common/params.h"

namespace tmpi {

namespace {

std::string shown_default(const ParamSpec& spec) {
  if (spec.default_value.empty()) return "";
  return fmt::format("default {}", spec.default_value);
}

std::string scope_names(unsigned scopes) {
  std::string out;
  auto add = [&](unsigned bit, std::string_view name) {
    if ((scopes & bit) != 0) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(kScopeInit, "mpi-init");
  add(kScopeRendezvous, "mpi-rendezvous");
  add(kScopeLauncher, "mpi-launcher");
  add(kScopeCheck, "nccl-check");
  add(kScopeSshd, "mpi-sshd");
  add(kScopeRank, "mpi-rank");
  add(kScopeConvert, "mpi-launcher convert");
  return out;
}

// "1 to 65535" for a ranged integer, "100ms to 10m" for a duration, "" for anything else.
std::string range_text(const ParamSpec& spec) {
  if (spec.type == ParamType::kInt) return fmt::format("{} to {}", spec.min, spec.max);
  if (spec.type != ParamType::kDuration) return "";
  return fmt::format("{} to {}", format_duration(std::chrono::milliseconds(spec.min)),
                     format_duration(std::chrono::milliseconds(spec.max)));
}

}  // namespace

std::string help_text(std::string_view synopsis, unsigned scope) {
  std::string out = fmt::format("usage: {}\n\nOptions (each also a TMPI_ variable):\n", synopsis);
  for (const auto& spec : param_table()) {
    if ((spec.scopes & scope) == 0) continue;
    // A boolean flag is bare or --name=VALUE, never --name VALUE (params.cpp).
    std::string flag = spec.type == ParamType::kBool ? fmt::format("--{}[={}]", spec.name, spec.metavar)
                                                     : fmt::format("--{} {}", spec.name, spec.metavar);
    out += fmt::format("  {:<28} {}\n", flag, spec.help);
    std::string detail = env_name(spec.name);
    if (!spec.choices.empty()) detail += fmt::format(", one of {}", spec.choices);
    if (!spec.default_value.empty()) detail += ", " + shown_default(spec);
    if (auto range = range_text(spec); !range.empty()) detail += ", " + range;
    out += fmt::format("  {:<28} ({})\n", "", detail);
  }
  out += "  --help                       this text\n";
  // From the one exit-code table (common/exit_codes.cpp), so that --help cannot fall behind it.
  out += "\nExit codes:";
  for (const ExitInfo& row : exit_table())
    out += fmt::format(" {} {},", static_cast<int>(row.exit), row.name);
  out += " other: a rank's own code (128+N for signal N).\n";
  return out;
}

std::string markdown_table() {
  std::string out = "| flag | variable | default | used by | description |\n";
  out += "|---|---|---|---|---|\n";
  for (const auto& spec : param_table()) {
    std::string value = spec.default_value.empty() ? "" : fmt::format("`{}`", spec.default_value);
    std::string help(spec.help);
    if (!spec.choices.empty()) help += fmt::format(" (`{}`)", spec.choices);
    if (auto range = range_text(spec); !range.empty()) help += fmt::format(" ({})", range);
    out += fmt::format("| `--{}` | `{}` | {} | {} | {} |\n", spec.name, env_name(spec.name), value,
                       scope_names(spec.scopes), help);
  }
  return out;
}

}  // namespace tmpi

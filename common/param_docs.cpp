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
  return out;
}

}  // namespace

std::string help_text(std::string_view synopsis, unsigned scope) {
  std::string out = fmt::format("usage: {}\n\nOptions (each also a TMPI_ variable):\n", synopsis);
  for (const auto& spec : param_table()) {
    if ((spec.scopes & scope) == 0) continue;
    std::string flag = fmt::format("--{} {}", spec.name, spec.metavar);
    out += fmt::format("  {:<28} {}\n", flag, spec.help);
    std::string detail = env_name(spec.name);
    if (!spec.choices.empty()) detail += fmt::format(", one of {}", spec.choices);
    if (!spec.default_value.empty()) detail += ", " + shown_default(spec);
    if (spec.type == ParamType::kInt) detail += fmt::format(", {} to {}", spec.min, spec.max);
    out += fmt::format("  {:<28} ({})\n", "", detail);
  }
  out += "  --help                       this text\n";
  out += "\nExit codes: 0 ok, 1 job failed, 2 bad usage or input, 3 timeout, 4 preflight failed.\n";
  return out;
}

std::string markdown_table() {
  std::string out = "| flag | variable | default | used by | description |\n";
  out += "|---|---|---|---|---|\n";
  for (const auto& spec : param_table()) {
    std::string value = spec.default_value.empty() ? "" : fmt::format("`{}`", spec.default_value);
    std::string help(spec.help);
    if (!spec.choices.empty()) help += fmt::format(" (`{}`)", spec.choices);
    if (spec.type == ParamType::kInt) help += fmt::format(" ({} to {})", spec.min, spec.max);
    out += fmt::format("| `--{}` | `{}` | {} | {} | {} |\n", spec.name, env_name(spec.name), value,
                       scope_names(spec.scopes), help);
  }
  return out;
}

}  // namespace tmpi

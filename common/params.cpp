// Parsing for the parameter registry. Boost.Program_options reads the command line (long
// options, --name=value, no abbreviations); the TMPI_ variables are read directly from the
// table, since every row knows its own variable. Both sources go through validate_param.
#include "common/params.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <boost/program_options.hpp>

namespace tmpi {
namespace po = boost::program_options;

namespace {

std::string home_dir() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return home;
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr) return pw->pw_dir;
  return "/";
}

std::string expand_default(std::string_view value) {
  std::string out(value);
  if (auto pos = out.find("$HOME"); pos != std::string::npos) out.replace(pos, 5, home_dir());
  return out;
}

Expected<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    return make_error(Exit::kUsage, "'{}' is not a whole number", text);
  }
  return value;
}

std::string lowered(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

// The spellings of a boolean, in a flag (--name=VALUE) and in a TMPI_ variable alike.
bool parse_bool(std::string_view text, bool& out) {
  const std::string lower = lowered(text);
  if (lower == "1" || lower == "true" || lower == "yes") return out = true, true;
  if (lower == "0" || lower == "false" || lower == "no") return out = false, true;
  return false;
}

// A word a person may have meant as a boolean flag's value, "off" included.
bool looks_boolean(std::string_view text) {
  bool ignored = false;
  const std::string lower = lowered(text);
  return parse_bool(lower, ignored) || lower == "on" || lower == "off";
}

const ParamSpec* bool_flag(std::string_view name, unsigned scope) {
  for (const auto& spec : param_table()) {
    if ((spec.scopes & scope) != 0 && spec.type == ParamType::kBool && spec.name == name) return &spec;
  }
  return nullptr;
}

// Boolean flags are bare (`--dry-run`: true) or `--dry-run=VALUE`; the word after a bare one
// is never its value, so `--dry-run false` cannot mean two things (before, a boolean word
// was taken as the value and any other word was not). A boolean word there is refused with
// the fix; `--name=VALUE` becomes the bare flag, its value kept in `values`.
Expected<std::vector<std::string>> take_bool_values(const std::vector<std::string>& args, unsigned scope,
                                                    std::map<std::string, std::string>& values) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    const std::size_t eq = word.find('=');
    const ParamSpec* spec =
        word.starts_with("--") ? bool_flag(std::string_view(word).substr(2, eq - 2), scope) : nullptr;
    if (spec == nullptr) {
      out.push_back(word);
      continue;
    }
    const std::string flag = "--" + std::string(spec->name);
    if (eq != std::string::npos) {
      bool ignored = false;
      const std::string value = word.substr(eq + 1);
      if (!parse_bool(value, ignored)) {
        return make_error(Exit::kUsage,
                          "{}: '{}' is not a boolean: give true, false, 1, 0, yes or no ({} alone is "
                          "true); {}",
                          flag, value, flag, spec->help);
      }
      values[std::string(spec->name)] = value;
    } else if (i + 1 < args.size() && looks_boolean(args[i + 1])) {
      return make_error(Exit::kUsage,
                        "{} takes no separate value, and '{}' follows it: write {}={} ({} alone is "
                        "true)",
                        flag, args[i + 1], flag, args[i + 1], flag);
    }
    out.push_back(flag);
  }
  return out;
}

}  // namespace

std::string env_name(std::string_view param_name) {
  std::string out = "TMPI_";
  for (char c : param_name) {
    out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

Expected<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) {
    ++digits;
  }
  auto number = parse_int(text.substr(0, digits));
  std::string_view unit = text.substr(digits);
  if (!number) return make_error(Exit::kUsage, "'{}' is not a duration", text);
  const std::map<std::string_view, std::int64_t> scale = {
      {"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"h", 3600000}};
  auto it = scale.find(unit);
  if (it == scale.end()) {
    return make_error(Exit::kUsage, "'{}' has an unknown unit (use ms, s, m or h)", text);
  }
  // parse_int took only digits, so the number is not negative; its product must still fit.
  if (*number > std::numeric_limits<std::int64_t>::max() / it->second) {
    return make_error(Exit::kUsage, "'{}' is too long a duration", text);
  }
  return std::chrono::milliseconds(*number * it->second);
}

std::string format_duration(std::chrono::milliseconds duration) {
  const std::int64_t ms = duration.count();
  if (ms == 0) return "0";
  if (ms % 3600000 == 0) return fmt::format("{}h", ms / 3600000);
  if (ms % 60000 == 0) return fmt::format("{}m", ms / 60000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

Expected<double> parse_number(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || !std::isfinite(value)) {
    return make_error(Exit::kUsage, "'{}' is not a number", text);
  }
  return value;
}

Expected<std::uint64_t> parse_bytes(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) ++digits;
  auto number = parse_int(text.substr(0, digits));
  std::string unit(text.substr(digits));
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const std::map<std::string, int, std::less<>> shift = {{"", 0},   {"B", 0},    {"K", 10}, {"KIB", 10},
                                                         {"M", 20}, {"MIB", 20}, {"G", 30}, {"GIB", 30}};
  auto it = shift.find(unit);
  if (!number || it == shift.end())
    return make_error(Exit::kUsage, "'{}' is not a size (use 4096, 64K, 1M or 1G)", text);
  if (*number >> (62 - it->second) != 0) return make_error(Exit::kUsage, "'{}' is too large", text);
  return static_cast<std::uint64_t>(*number) << it->second;
}

Status validate_param(const ParamSpec& spec, std::string_view value, std::string_view where) {
  auto fail = [&](std::string_view why) {
    return make_error(Exit::kUsage, "{}: {}; {}", where, why, spec.help);
  };
  switch (spec.type) {
    case ParamType::kInt: {
      auto n = parse_int(value);
      if (!n) return fail(n.error().message);
      if (*n < spec.min || *n > spec.max) {
        return fail(fmt::format("{} is out of range: {} to {}", *n, spec.min, spec.max));
      }
      break;
    }
    case ParamType::kNumber:
      if (auto n = parse_number(value); !n) return fail(n.error().message);
      break;
    case ParamType::kBytes:
      if (auto n = parse_bytes(value); !n) return fail(n.error().message);
      break;
    case ParamType::kDuration: {
      auto d = parse_duration(value);
      if (!d) return fail(d.error().message);
      if (d->count() < spec.min || d->count() > spec.max) {
        return fail(fmt::format("{} is out of range: {} to {}", value,
                                format_duration(std::chrono::milliseconds(spec.min)),
                                format_duration(std::chrono::milliseconds(spec.max))));
      }
      break;
    }
    case ParamType::kBool: {
      bool ignored = false;
      if (!parse_bool(value, ignored)) {
        return fail(fmt::format("'{}' is not a boolean (true, false, 1, 0, yes or no)", value));
      }
      break;
    }
    case ParamType::kChoice: {
      std::string choices(spec.choices);
      std::string padded = "|" + choices + "|";
      if (padded.find("|" + std::string(value) + "|") == std::string::npos) {
        return fail(fmt::format("'{}' is not one of {}", value, choices));
      }
      break;
    }
    case ParamType::kPath:
    case ParamType::kString:
    case ParamType::kList:
      break;
  }
  return ok_status();
}

Expected<Params> Params::parse(unsigned scope, const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env) {
  Params params;
  std::vector<std::string> own_args;
  auto dashdash = std::find(args.begin(), args.end(), "--");
  std::map<std::string, std::string> bool_values;  // --name=VALUE of the boolean flags
  TMPI_ASSIGN(own_args,
              take_bool_values(std::vector<std::string>(args.begin(), dashdash), scope, bool_values));
  if (dashdash != args.end()) params.rest_.assign(dashdash + 1, args.end());

  po::options_description desc;
  desc.add_options()("help,h", "");
  for (const auto& spec : param_table()) {
    if ((spec.scopes & scope) == 0) continue;
    std::string name(spec.name);
    if (spec.type == ParamType::kList) {
      desc.add_options()(name.c_str(), po::value<std::vector<std::string>>()->composing(), "");
    } else if (spec.type == ParamType::kBool) {
      desc.add_options()(name.c_str(), po::value<std::string>()->zero_tokens()->implicit_value("true"), "");
    } else {
      desc.add_options()(name.c_str(), po::value<std::string>(), "");
    }
  }
  po::options_description hidden;
  hidden.add_options()("positional", po::value<std::vector<std::string>>(), "");
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("positional", -1);

  po::variables_map vm;
  try {
    auto style = po::command_line_style::unix_style ^ po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(own_args).options(all).positional(positional).style(style).run(), vm);
  } catch (const po::error& e) {
    return make_error(Exit::kUsage, "{} (see --help)", e.what());
  }
  params.help_ = vm.count("help") > 0;
  if (vm.count("positional") > 0) params.positional_ = vm["positional"].as<std::vector<std::string>>();

  for (const auto& spec : param_table()) {
    if ((spec.scopes & scope) == 0) {
      // Outside this command: its default, so that no reader can find a hole.
      params.values_[spec.index] = parsed(spec, expand_default(spec.default_value), false);
      continue;
    }
    std::string name(spec.name);
    std::string variable = env_name(spec.name);
    std::string value;
    bool given = true;
    if (vm.count(name) > 0) {
      if (spec.type == ParamType::kList) {
        for (const auto& item : vm[name].as<std::vector<std::string>>()) {
          value += (value.empty() ? "" : ",") + item;
        }
      } else if (auto explicit_value = bool_values.find(name); explicit_value != bool_values.end()) {
        value = explicit_value->second;
      } else {
        value = vm[name].as<std::string>();
      }
      TMPI_CHECK(validate_param(spec, value, "--" + name));
    } else if (auto it = env.find(variable); it != env.end()) {
      value = it->second;
      TMPI_CHECK(validate_param(spec, value, variable));
      params.env_overrides_.push_back(fmt::format("{}={} (from {})", name, value, variable));
    } else {
      value = expand_default(spec.default_value);
      given = false;
    }
    params.values_[spec.index] = parsed(spec, std::move(value), given);
  }
  return params;
}

// The one place a value's text becomes its typed value. validate_param has passed it (a
// default is proved by the unit tests: every row's default parses); an empty text, an unset
// default, stays zero.
Params::Value Params::parsed(const ParamSpec& spec, std::string text, bool given) {
  Value value;
  value.given = given;
  switch (spec.type) {
    case ParamType::kInt:
      if (auto n = parse_int(text); n) value.integer = *n;
      break;
    case ParamType::kNumber:
      if (auto n = parse_number(text); n) value.number = *n;
      break;
    case ParamType::kBytes:
      if (auto n = parse_bytes(text); n) value.bytes = *n;
      break;
    case ParamType::kDuration:
      if (auto d = parse_duration(text); d) value.duration = *d;
      break;
    case ParamType::kBool:
      value.flag = parse_bool(text, value.flag) && value.flag;
      break;
    case ParamType::kList:
      for (std::size_t start = 0; start < text.size();) {
        std::size_t comma = std::min(text.find(',', start), text.size());
        if (comma > start) value.list.push_back(text.substr(start, comma - start));
        start = comma + 1;
      }
      break;
    case ParamType::kString:
    case ParamType::kPath:
    case ParamType::kChoice:
      break;
  }
  value.text = std::move(text);
  return value;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

}  // namespace tmpi

// See oom.h. Bounded reads (a memory.events file is a few hundred bytes), no exceptions: the
// agent must not abort over a cgroup file it cannot parse.
#include "agent/oom.h"

#include <charconv>
#include <fstream>
#include <iterator>

namespace tmpi::launch {

namespace {

constexpr std::size_t kMaxFileBytes = 64 * 1024;

std::optional<std::string> read_small(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text(kMaxFileBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

// A cgroup path from /proc/self/cgroup is absolute and has no "..": anything else is not joined.
bool plain_path(std::string_view path) {
  return !path.empty() && path.front() == '/' && path.find("..") == std::string_view::npos &&
         path.find('\0') == std::string_view::npos;
}

}  // namespace

std::optional<long long> oom_kill_count(std::string_view text) {
  constexpr std::string_view kKey = "oom_kill ";
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.starts_with(kKey)) {
      std::string_view digits = line.substr(kKey.size());
      long long count = 0;
      auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (error != std::errc() || stop != digits.data() + digits.size() || count < 0) return std::nullopt;
      return count;
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::vector<std::string> oom_count_files(std::string_view proc_self_cgroup, const std::string& root) {
  std::vector<std::string> files;
  std::string v2_path, v1_path;
  std::size_t at = 0;
  while (at < proc_self_cgroup.size()) {
    std::size_t end = proc_self_cgroup.find('\n', at);
    if (end == std::string_view::npos) end = proc_self_cgroup.size();
    std::string_view line = proc_self_cgroup.substr(at, end - at);
    // "ID:CONTROLLERS:PATH": v2's line is "0::PATH"; v1's memory line names "memory" among its controllers.
    std::size_t first = line.find(':'),
                second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second != std::string_view::npos) {
      std::string_view controllers = line.substr(first + 1, second - first - 1);
      std::string_view path = line.substr(second + 1);
      if (line.substr(0, first) == "0" && controllers.empty() && plain_path(path)) v2_path = path;
      if ((controllers == "memory" || controllers.starts_with("memory,") ||
           controllers.ends_with(",memory")) &&
          plain_path(path))
        v1_path = path;
    }
    at = end + 1;
  }
  if (!v2_path.empty() && v2_path != "/") files.push_back(root + v2_path + "/memory.events");
  files.push_back(root + "/memory.events");
  if (!v1_path.empty() && v1_path != "/") files.push_back(root + "/memory" + v1_path + "/memory.oom_control");
  files.push_back(root + "/memory/memory.oom_control");
  return files;
}

std::optional<long long> memory_limit_bytes(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  long long bytes = 0;
  auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
  constexpr long long kNoLimit = 1LL << 62;  // v1 writes LONG_MAX rounded down to a page
  if (text.empty() || error != std::errc() || stop != text.data() + text.size() || bytes <= 0 ||
      bytes >= kNoLimit)
    return std::nullopt;
  return bytes;
}

std::optional<long long> cgroup_memory_limit(const std::string& root) {
  std::optional<std::string> self = read_small("/proc/self/cgroup");
  for (const std::string& file : oom_count_files(self ? *self : std::string(), root)) {
    const bool v2 = file.ends_with("/memory.events");
    std::string limit = file.substr(0, file.rfind('/')) + (v2 ? "/memory.max" : "/memory.limit_in_bytes");
    if (std::optional<std::string> text = read_small(limit)) return memory_limit_bytes(*text);
  }
  return std::nullopt;
}

std::optional<long long> cgroup_oom_kills(const std::string& root) {
  std::optional<std::string> self = read_small("/proc/self/cgroup");
  for (const std::string& file : oom_count_files(self ? *self : std::string(), root)) {
    std::optional<std::string> text = read_small(file);
    if (!text) continue;
    if (std::optional<long long> count = oom_kill_count(*text)) return count;
  }
  return std::nullopt;
}

OomSeen oom_since(std::optional<long long> before) {
  std::optional<long long> now = before ? cgroup_oom_kills() : std::nullopt;
  if (!now) return {};
  if (*now <= *before) return {.counted = true};
  return {.counted = true, .killed = true, .memory_limit = cgroup_memory_limit().value_or(0)};
}

}  // namespace tmpi::launch

// The kernel's OOM kills in the rank's memory cgroup, counted before the rank starts and after
// it ends, so that a rank killed by SIGKILL can be told apart: the OOM killer's (the program's
// failure: it asked for more memory than its pod has) or another's (the kubelet, a person, an
// eviction: the infrastructure's, which an in-place restart may clear; launcher/restarts.h).
//
// Where the count lives (the kernel's Documentation/admin-guide/cgroup-v2.rst, memory.events,
// and cgroup-v1/memory.rst, memory.oom_control): "oom_kill N" in
//   cgroup v2: /sys/fs/cgroup/<path of the "0::" line of /proc/self/cgroup>/memory.events
//   cgroup v1: /sys/fs/cgroup/memory/<path of the "memory" line>/memory.oom_control
// A container sees its own cgroup at the mount's root (a cgroup namespace, or the runtime's
// bind mount of its subtree), where /proc/self/cgroup may still name the host's path: so the
// named path first, then the mount's root. Nothing readable: no count (nullopt), and a SIGKILL
// is then taken as the infrastructure's, as before this count existed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tmpi::launch {

// The "oom_kill N" of a memory.events or memory.oom_control text; nullopt when absent or malformed.
std::optional<long long> oom_kill_count(std::string_view text);

// The files to read, in order, from /proc/self/cgroup's text and the cgroup mount's root.
std::vector<std::string> oom_count_files(std::string_view proc_self_cgroup, const std::string& root);

// The count now, from the first of those files that holds one (root: /sys/fs/cgroup).
std::optional<long long> cgroup_oom_kills(const std::string& root = "/sys/fs/cgroup");

// The cgroup's memory limit in bytes, for the OOM's message: v2's memory.max, v1's
// memory.limit_in_bytes, beside the count's file; nullopt for none ("max", or v1's
// page-rounded LONG_MAX) or where unreadable.
std::optional<long long> memory_limit_bytes(std::string_view text);
std::optional<long long> cgroup_memory_limit(const std::string& root = "/sys/fs/cgroup");

// Whether the count could be read now and at the rank's start (`before`), whether it rose,
// and then the limit (0: unknown).
struct OomSeen {
  bool counted = false;  // the count was read at both ends: no rise means no OOM kill
  bool killed = false;
  long long memory_limit = 0;
};
OomSeen oom_since(std::optional<long long> before);

}  // namespace tmpi::launch

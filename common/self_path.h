// The running program's own file, to find its siblings (mpi-launcher finds mpi-rank and
// nccl-check beside itself; mpi-ssh finds mpi-ssh-client).
//
// Normally /proc/self/exe. Under the bundle (bundle/start.c) the kernel ran the bundle's
// loader by hand, so /proc/self/exe names the loader; the start then passes the program's
// own path in the bundle's bin/ as argv[0] (glibc keeps it in program_invocation_name).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>

namespace tmpi {

inline std::string self_path() {
  char path[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  std::string exe = n > 0 ? std::string(path, static_cast<std::size_t>(n)) : "";
  std::string invoked = program_invocation_name != nullptr ? program_invocation_name : "";
  bool under_loader = exe.empty() || exe.substr(exe.rfind('/') + 1).starts_with("ld-linux");
  if (under_loader && invoked.starts_with('/')) return invoked;
  return exe;
}

}  // namespace tmpi

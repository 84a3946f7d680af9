// `mpi-launcher run` and `mpi-launcher check`: wait for the hosts, run the preflight, then
// launch and supervise the job (run only). See run.cpp.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace tmpi::launch {

Status run_job(const LauncherOptions& options, const std::vector<std::string>& user_command);
Status check_job(const LauncherOptions& options);

}  // namespace tmpi::launch

// `mpi-launcher run` and `mpi-launcher check`: wait for the hosts, run the preflight, then
// launch and supervise the job (run only). See run.cpp.
#pragma once

#include "common/params.h"

namespace tmpi::launch {

Status run_job(const Params& params);
Status check_job(const Params& params);

}  // namespace tmpi::launch

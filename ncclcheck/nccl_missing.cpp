// make_nccl_fabric where NCCL was not found at build time: the NCCL backend is then a
// clear error, not a missing symbol. CMake compiles this file instead of nccl_fabric.cpp.
#include "ncclcheck/fabric.h"

namespace tmpi::check {

Expected<std::unique_ptr<Fabric>> make_nccl_fabric(Progress& /*progress*/, int /*local_rank*/,
                                                   const std::string& host) {
  return make_error(
      Exit::kUnavailable,
      "this nccl-check on {} was built without NCCL (its build found no nccl.h); rebuild it where "
      "CUDA and NCCL are installed, or use --backend mpi",
      host);
}

}  // namespace tmpi::check

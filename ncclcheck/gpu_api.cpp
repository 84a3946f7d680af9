// See gpu_api.h. Each call is bound by the symbol that its header's macros name (cuda.h maps
// cuMemAlloc to cuMemAlloc_v2, and so on); a library without one is refused whole, before
// any call, so that a rank never calls through a null pointer.
#include "ncclcheck/gpu_api.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace tmpi::check {

namespace {

// Binds `name` in `handle` to `function`, or says which call is missing.
template <typename Function>
bool bind(void* handle, const char* name, Function& function, std::string& missing) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    if (!missing.empty()) missing += ", ";
    missing += name;
    return false;
  }
  function = reinterpret_cast<Function>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  return true;
}

}  // namespace

std::string NcclApi::name() const {
  return fmt::format("NCCL {} ({})", nccl_version_text(version), library.path);
}

std::string CudaDriverApi::describe(CuResult result) const {
  const char* text = nullptr;
  if (get_error_string != nullptr && get_error_string(result, &text) == kCuSuccess && text != nullptr)
    return fmt::format("{} ({})", text, result);
  return fmt::format("CUDA error {}", result);
}

Expected<NcclApi> load_nccl(const LibrarySearch& search) {
  TMPI_ASSIGN(LoadedLibrary library, load_library(search, Exit::kConfig));
  NcclApi api;
  api.library = std::move(library);
  void* handle = api.library.handle;
  std::string missing;
  bind(handle, "ncclGetVersion", api.get_version, missing);
  bind(handle, "ncclGetUniqueId", api.get_unique_id, missing);
  bind(handle, "ncclCommInitRankConfig", api.comm_init_rank_config, missing);
  bind(handle, "ncclCommFinalize", api.comm_finalize, missing);
  bind(handle, "ncclCommDestroy", api.comm_destroy, missing);
  bind(handle, "ncclCommAbort", api.comm_abort, missing);
  bind(handle, "ncclCommGetAsyncError", api.comm_get_async_error, missing);
  bind(handle, "ncclGetErrorString", api.get_error_string, missing);
  bind(handle, "ncclGetLastError", api.get_last_error, missing);
  bind(handle, "ncclAllReduce", api.all_reduce, missing);
  if (api.get_version != nullptr) api.get_version(&api.version);
  if (!missing.empty()) {
    return make_error(Exit::kConfig,
                      "{} lacks {}: nccl-check needs NCCL 2.14 or newer (non-blocking communicators); use an "
                      "image with a newer NCCL, or --check mpi",
                      api.get_version != nullptr ? api.name() : api.library.path, missing);
  }
  return api;
}

Expected<CudaDriverApi> load_cuda_driver(const LibrarySearch& search) {
  TMPI_ASSIGN(LoadedLibrary library, load_library(search, Exit::kUnavailable));
  CudaDriverApi api;
  api.library = std::move(library);
  void* handle = api.library.handle;
  std::string missing;
  bind(handle, "cuInit", api.init, missing);
  bind(handle, "cuDeviceGetCount", api.device_get_count, missing);
  bind(handle, "cuDeviceGet", api.device_get, missing);
  bind(handle, "cuDeviceGetName", api.device_get_name, missing);
  bind(handle, "cuDeviceGetPCIBusId", api.device_get_pci_bus_id, missing);
  bind(handle, "cuDevicePrimaryCtxRetain", api.primary_ctx_retain, missing);
  bind(handle, "cuDevicePrimaryCtxRelease_v2", api.primary_ctx_release, missing);
  bind(handle, "cuCtxSetCurrent", api.ctx_set_current, missing);
  bind(handle, "cuStreamCreate", api.stream_create, missing);
  bind(handle, "cuStreamQuery", api.stream_query, missing);
  bind(handle, "cuStreamDestroy_v2", api.stream_destroy, missing);
  bind(handle, "cuMemAlloc_v2", api.mem_alloc, missing);
  bind(handle, "cuMemFree_v2", api.mem_free, missing);
  bind(handle, "cuMemcpyHtoD_v2", api.memcpy_htod, missing);
  bind(handle, "cuMemcpyDtoH_v2", api.memcpy_dtoh, missing);
  bind(handle, "cuMemsetD8_v2", api.memset_d8, missing);
  bind(handle, "cuGetErrorString", api.get_error_string, missing);
  if (!missing.empty()) {
    return make_error(Exit::kUnavailable, "the CUDA driver {} lacks {}: a driver older than CUDA 11?",
                      api.library.path, missing);
  }
  return api;
}

}  // namespace tmpi::check

// The few calls of NCCL and of the CUDA driver that nccl-check makes, declared here and
// bound with dlsym (gpu_libraries.h says why at run time), so that the NCCL backend builds
// everywhere, with no CUDA installed, and the binary needs neither library to start.
//
// Every type and value is copied from the upstream headers, which keep them stable as ABI:
// NCCL's nccl.h (2.28.9; ncclUniqueId, ncclResult_t, ncclFloat = 7, ncclSum = 0, and the
// calls, the same since 2.14, the first with non-blocking communicators) and CUDA's cuda.h
// (13.0; CUresult, CU_STREAM_NON_BLOCKING = 1, CUDA_ERROR_NOT_READY = 600, and the _v2
// symbols that cuda.h's macros name for cuMemAlloc and its kin since CUDA 3.2).
//
// ncclConfig_t grows with each NCCL. Its first fields say its size, a magic and the version
// of the header it was made by; NCCL copies no more than that size and sets every field that
// the version predates to its default (parseCommConfig, NCCL's init.cc). So the prefix of
// NCCL 2.17's layout, with its version, is read alike by every NCCL from 2.17 on, and 2.14
// to 2.16 read its first fields (blocking among them) and ignore the rest.
#pragma once

#include <cstddef>
#include <string>

#include "ncclcheck/gpu_libraries.h"

namespace tmpi::check {

// nccl.h
using NcclResult = int;  // ncclResult_t
inline constexpr NcclResult kNcclSuccess = 0, kNcclInProgress = 7;
using NcclComm = struct NcclCommOpaque*;  // ncclComm_t
struct NcclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
struct NcclConfig {  // ncclConfig_t, NCCL 2.17's fields
  std::size_t size = sizeof(NcclConfig);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 21700;  // NCCL_VERSION(2, 17, 0)
  int blocking = kUndefined, cga_cluster_size = kUndefined, min_ctas = kUndefined, max_ctas = kUndefined;
  const char* net_name = nullptr;
  static constexpr int kUndefined = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT (INT_MIN)
};
inline constexpr int kNcclFloat = 7, kNcclSum = 0;  // ncclFloat32, ncclSum

// cuda.h (the driver API)
using CuResult = int;  // CUresult
inline constexpr CuResult kCuSuccess = 0, kCuNotReady = 600;
using CuDevice = int;                       // CUdevice
using CuContext = struct CuContextOpaque*;  // CUcontext
using CuStream = struct CuStreamOpaque*;    // CUstream (a cudaStream_t too)
using CuDevicePtr = unsigned long long;     // CUdeviceptr // NOLINT(google-runtime-int): cuda.h's type
inline constexpr unsigned int kCuStreamNonBlocking = 1;

struct NcclApi {
  LoadedLibrary library;
  int version = 0;  // ncclGetVersion's code
  NcclResult (*get_version)(int*) = nullptr;
  NcclResult (*get_unique_id)(NcclUniqueId*) = nullptr;
  NcclResult (*comm_init_rank_config)(NcclComm*, int, NcclUniqueId, int, NcclConfig*) = nullptr;
  NcclResult (*comm_finalize)(NcclComm) = nullptr;
  NcclResult (*comm_destroy)(NcclComm) = nullptr;
  NcclResult (*comm_abort)(NcclComm) = nullptr;
  NcclResult (*comm_get_async_error)(NcclComm, NcclResult*) = nullptr;
  const char* (*get_error_string)(NcclResult) = nullptr;
  const char* (*get_last_error)(NcclComm) = nullptr;
  NcclResult (*all_reduce)(const void*, void*, std::size_t, int, int, NcclComm, CuStream) = nullptr;

  // "NCCL 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2)": which NCCL, and whose.
  std::string name() const;
};

struct CudaDriverApi {
  LoadedLibrary library;
  CuResult (*init)(unsigned int) = nullptr;
  CuResult (*device_get_count)(int*) = nullptr;
  CuResult (*device_get)(CuDevice*, int) = nullptr;
  CuResult (*device_get_name)(char*, int, CuDevice) = nullptr;
  CuResult (*device_get_pci_bus_id)(char*, int, CuDevice) = nullptr;
  CuResult (*primary_ctx_retain)(CuContext*, CuDevice) = nullptr;
  CuResult (*primary_ctx_release)(CuDevice) = nullptr;
  CuResult (*ctx_set_current)(CuContext) = nullptr;
  CuResult (*stream_create)(CuStream*, unsigned int) = nullptr;
  CuResult (*stream_query)(CuStream) = nullptr;
  CuResult (*stream_destroy)(CuStream) = nullptr;
  CuResult (*mem_alloc)(CuDevicePtr*, std::size_t) = nullptr;
  CuResult (*mem_free)(CuDevicePtr) = nullptr;
  CuResult (*memcpy_htod)(CuDevicePtr, const void*, std::size_t) = nullptr;
  CuResult (*memcpy_dtoh)(void*, CuDevicePtr, std::size_t) = nullptr;
  CuResult (*memset_d8)(CuDevicePtr, unsigned char, std::size_t) = nullptr;
  CuResult (*get_error_string)(CuResult, const char**) = nullptr;

  // "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected (100)", or the code alone.
  std::string describe(CuResult result) const;
};

// NCCL from `search`: Exit::kConfig (78) when no candidate loads (the image lacks it: a
// restart cannot help), and when the one found lacks a call (older than 2.14).
Expected<NcclApi> load_nccl(const LibrarySearch& search);
// The CUDA driver from `search`: Exit::kUnavailable (69) when none loads (no GPU given).
Expected<CudaDriverApi> load_cuda_driver(const LibrarySearch& search);

}  // namespace tmpi::check

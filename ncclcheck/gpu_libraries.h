// The image's NCCL and CUDA driver, found at run time (dlopen), so that one nccl-check
// binary serves every image: it links neither (bundle/install.cmake carries neither), and
// an image with another NCCL, or none, needs no other build.
//
// Why the search is ours and not only the loader's: the bundle's start (bundle/start.c)
// runs nccl-check with the loader's `--library-path`, which stands in for LD_LIBRARY_PATH,
// so the loader no longer reads the image's LD_LIBRARY_PATH. Its folders are tried here,
// one by one, before the soname alone (the loader's cache and default folders, where a
// distribution package or NVIDIA's containers install libnccl2), then CUDA's own folder.
//
// Why the CUDA driver (libcuda.so.1) and not the runtime (libcudart.so.N): the driver's
// soname has been libcuda.so.1 since CUDA's start, and the NVIDIA container toolkit mounts it
// into every pod given a GPU, from the host, whatever the image's CUDA; the runtime's soname
// changes with each CUDA major (.11.0, .12, .13), and pip's wheels keep it out of the
// loader's sight. NCCL carries its own (static) runtime and works on the context that the
// driver API makes current (the primary context: nccl_fabric.cpp). No libcuda.so.1 means
// that no GPU was given to this pod: the "no GPU" path (69), not the "no NCCL" one (78).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tmpi::check {

inline constexpr std::string_view kNcclSoname = "libnccl.so.2";        // NCCL 2's ABI
inline constexpr std::string_view kCudaDriverSoname = "libcuda.so.1";  // never the stub libcuda.so
inline constexpr std::string_view kCudaHome = "/usr/local/cuda";       // CUDA's default install

struct LibrarySearch {
  std::string soname;
  std::vector<std::string> candidates;  // tried in order: a path, or the soname alone
  std::string where;                    // the same places in words, for the line when none loads
};

// Where libnccl.so.2 is looked for: `chosen` alone where the user named one (--nccl-library);
// else each folder of `ld_library_path`, the loader's own search, then $CUDA_HOME/lib64 (where
// set) and /usr/local/cuda/lib64.
LibrarySearch nccl_search(const std::string& chosen, std::string_view ld_library_path,
                          std::string_view cuda_home);
// Where libcuda.so.1 is looked for: each folder of `ld_library_path` (NVIDIA's containers
// list /usr/local/nvidia/lib64 there, where older device plugins mount the driver), then the
// loader's own search (the container toolkit's mounts are in its cache).
LibrarySearch cuda_driver_search(std::string_view ld_library_path);

struct LoadedLibrary {
  void* handle = nullptr;  // never closed: NCCL's threads outlive any point to close it at
  std::string path;        // the file the loader found (its link map's name)
};

// The first candidate that loads (RTLD_NOW: a library with a missing dependency counts as
// not found, and the loader's reason is kept for the line). `missing` is the Error's code.
Expected<LoadedLibrary> load_library(const LibrarySearch& search, Exit missing);

// "libnccl.so.2 not found: looked in ...; the loader said: ..." (one line, the fix apart).
std::string not_found_text(const LibrarySearch& search, std::string_view loader_said);

// The one line of a job on GPUs whose image has no NCCL: what was looked for, where, and the fix.
std::string no_nccl_line(const std::string& not_found);

// "2.28.9" from ncclGetVersion's code (NCCL_VERSION in nccl.h: X*10000+Y*100+Z since 2.9,
// X*1000+Y*100+Z before).
std::string nccl_version_text(int code);

}  // namespace tmpi::check

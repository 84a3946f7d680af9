// nccl-check's search for the image's NCCL and CUDA driver (ncclcheck/gpu_libraries.h,
// gpu_api.h): the order of the places, the one line of an image without NCCL and its code
// (78, which no failure policy restarts on), a library that is not NCCL, and, where this
// machine has CUDA's NCCL, that it is found, named by version and path, without a GPU.
#include <filesystem>

#include <gtest/gtest.h>

#include "ncclcheck/gpu_api.h"
#include "ncclcheck/gpu_libraries.h"

namespace tmpi::check {
namespace {

using Candidates = std::vector<std::string>;

// LD_LIBRARY_PATH first (the bundle's --library-path hides it from the loader), then the
// loader's own search, then CUDA's folders; an empty entry is no folder.
TEST(GpuLibraries, NcclIsSearchedInTheImagesOrder) {
  auto search = nccl_search("", "/opt/a::/opt/b", "/opt/cuda-12");
  EXPECT_EQ(search.candidates,
            (Candidates{"/opt/a/libnccl.so.2", "/opt/b/libnccl.so.2", "libnccl.so.2",
                        "/opt/cuda-12/lib64/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}));
  EXPECT_EQ(
      search.where,
      "LD_LIBRARY_PATH (/opt/a:/opt/b), the loader's cache and default folders (/etc/ld.so.cache, /lib, "
      "/usr/lib), /opt/cuda-12/lib64, /usr/local/cuda/lib64");
  EXPECT_EQ(nccl_search("", "", "/usr/local/cuda").candidates,
            (Candidates{"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}));
  // A library the user named is the only one tried.
  EXPECT_EQ(nccl_search("/x/libnccl.so.2.19.3", "/opt/a", "").candidates,
            (Candidates{"/x/libnccl.so.2.19.3"}));
}

// The driver's soname only: never CUDA's stub libcuda.so, which loads and then fails cuInit.
TEST(GpuLibraries, TheCudaDriverIsLibcudaSo1) {
  EXPECT_EQ(cuda_driver_search("/usr/local/nvidia/lib64").candidates,
            (Candidates{"/usr/local/nvidia/lib64/libcuda.so.1", "libcuda.so.1"}));
  EXPECT_EQ(cuda_driver_search("").candidates, (Candidates{"libcuda.so.1"}));
}

TEST(GpuLibraries, AnImageWithoutNcclGetsOneLineAnd78) {
  auto missing = load_nccl(nccl_search("/nonexistent/libnccl.so.2", "", ""));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().exit, Exit::kConfig);
  EXPECT_EQ(static_cast<int>(Exit::kConfig), 78);
  std::string line = no_nccl_line(missing.error().message);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(
      line,
      "no NCCL in this image for --check nccl: libnccl.so.2 not found: looked in /nonexistent/libnccl.so.2 "
      "(--nccl-library); use an image with NCCL (NVIDIA's PyTorch containers have it), name its "
      "libnccl.so.2 with --nccl-library (TMPI_NCCL_LIBRARY), or use --check mpi");
  auto searched = load_nccl(nccl_search("", "/nonexistent-a:/nonexistent-b", "/nonexistent-cuda"));
  if (!searched) {  // this machine may have NCCL in its loader's cache
    EXPECT_NE(searched.error().message.find("LD_LIBRARY_PATH (/nonexistent-a:/nonexistent-b)"),
              std::string::npos)
        << searched.error().message;
  }
}

// A library that loads but is no NCCL (or one older than 2.14) is refused whole, naming what it lacks.
TEST(GpuLibraries, ALibraryWithoutNcclsCallsIsRefused) {
  auto not_nccl = load_nccl(nccl_search("libm.so.6", "", ""));
  ASSERT_FALSE(not_nccl);
  EXPECT_EQ(not_nccl.error().exit, Exit::kConfig);
  EXPECT_NE(not_nccl.error().message.find("lacks ncclGetVersion, ncclGetUniqueId"), std::string::npos)
      << not_nccl.error().message;
  EXPECT_NE(not_nccl.error().message.find("libm.so.6"), std::string::npos) << not_nccl.error().message;
  auto no_driver = load_cuda_driver({"libcuda.so.1", {"/nonexistent/libcuda.so.1"}, "/nonexistent"});
  ASSERT_FALSE(no_driver);
  EXPECT_EQ(no_driver.error().exit, Exit::kUnavailable);  // no GPU given: 69
}

TEST(GpuLibraries, VersionCodesOfEveryEra) {
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21403), "2.14.3");
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");  // NCCL_VERSION before 2.9: X*1000+Y*100+Z
}

// Where CUDA's NCCL is installed: it is found in LD_LIBRARY_PATH and named by version and
// the path the loader found, with no GPU and no CUDA driver (ncclGetVersion needs neither).
TEST(GpuLibraries, CudasNcclIsFoundAndNamed) {
  std::string folder = std::string(TMPI_CUDA_ROOT) + "/lib64";
  if (!std::filesystem::exists(folder + "/libnccl.so.2")) GTEST_SKIP() << "no NCCL in " << folder;
  auto nccl = load_nccl(nccl_search("", folder, ""));
  ASSERT_TRUE(nccl) << nccl.error().message;
  EXPECT_GE(nccl->version, 21400);
  // The loader names the file it mapped, its links followed (/usr/local/cuda is a link).
  auto mapped = std::filesystem::canonical(folder + "/libnccl.so.2").string();
  EXPECT_EQ(std::filesystem::canonical(nccl->library.path).string(), mapped);
  EXPECT_NE(nccl->name().find("NCCL " + nccl_version_text(nccl->version) + " ("), std::string::npos)
      << nccl->name();
  EXPECT_NE(nccl->name().find("libnccl.so.2)"), std::string::npos) << nccl->name();
  EXPECT_NE(nccl->all_reduce, nullptr);
}

}  // namespace
}  // namespace tmpi::check

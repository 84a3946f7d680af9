// See gpu_libraries.h. The search lists are pure (unit-tested); load_library is the one
// call into the loader.
#include "ncclcheck/gpu_libraries.h"

#include <dlfcn.h>
#include <link.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.h"

namespace tmpi::check {

namespace {

// The folders of a colon-separated list, in order, empty entries left out (the loader reads
// an empty entry as the current folder, which no image means for its libraries).
std::vector<std::string> folders_of(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    auto colon = list.find(':');
    std::string_view folder = list.substr(0, colon);
    if (!folder.empty()) out.emplace_back(folder);
    if (colon == std::string_view::npos) break;
    list.remove_prefix(colon + 1);
  }
  return out;
}

// The folders first, each with the soname; then the soname alone, for the loader's search.
LibrarySearch search_in(std::string_view soname, std::string_view ld_library_path,
                        const std::vector<std::string>& after) {
  LibrarySearch search{std::string(soname), {}, {}};
  auto before = folders_of(ld_library_path);
  for (const auto& folder : before) search.candidates.push_back(fmt::format("{}/{}", folder, soname));
  search.candidates.emplace_back(soname);
  for (const auto& folder : after) search.candidates.push_back(fmt::format("{}/{}", folder, soname));
  search.where = before.empty() ? "LD_LIBRARY_PATH (unset)"
                                : fmt::format("LD_LIBRARY_PATH ({})", fmt::join(before, ":"));
  search.where += ", the loader's cache and default folders (/etc/ld.so.cache, /lib, /usr/lib)";
  if (!after.empty()) search.where += fmt::format(", {}", fmt::join(after, ", "));
  return search;
}

}  // namespace

LibrarySearch nccl_search(const std::string& chosen, std::string_view ld_library_path,
                          std::string_view cuda_home) {
  if (!chosen.empty())
    return {std::string(kNcclSoname), {chosen}, fmt::format("{} (--nccl-library)", chosen)};
  std::vector<std::string> after;
  std::string standard = fmt::format("{}/lib64", kCudaHome);
  if (!cuda_home.empty() && fmt::format("{}/lib64", cuda_home) != standard)
    after.push_back(fmt::format("{}/lib64", cuda_home));
  after.push_back(standard);
  return search_in(kNcclSoname, ld_library_path, after);
}

LibrarySearch cuda_driver_search(std::string_view ld_library_path) {
  return search_in(kCudaDriverSoname, ld_library_path, {});
}

Expected<LoadedLibrary> load_library(const LibrarySearch& search, Exit missing) {
  std::string loader_said;
  for (const auto& candidate : search.candidates) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      // "cannot open shared object file: No such file" is the common case, said of every
      // folder; a library that is there but does not load says more: keep the first such.
      std::string said = why != nullptr ? why : "not loaded";
      if (loader_said.empty() || loader_said.find("No such file") != std::string::npos) loader_said = said;
      continue;
    }
    LoadedLibrary loaded{handle, candidate};
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        *map->l_name != '\0')
      loaded.path = map->l_name;
    return loaded;
  }
  return Error{missing, not_found_text(search, loader_said)};
}

std::string not_found_text(const LibrarySearch& search, std::string_view loader_said) {
  std::string text = fmt::format("{} not found: looked in {}", search.soname, search.where);
  // Only a reason beyond "no such file" says something the places do not.
  if (!loader_said.empty() && loader_said.find("No such file") == std::string_view::npos)
    text += fmt::format("; the loader said: {}", log::printable(loader_said));
  return text;
}

std::string no_nccl_line(const std::string& not_found) {
  return fmt::format(
      "no NCCL in this image for --check nccl: {}; use an image with NCCL (NVIDIA's PyTorch containers "
      "have it), name its libnccl.so.2 with --nccl-library (TMPI_NCCL_LIBRARY), or use --check mpi",
      not_found);
}

std::string nccl_version_text(int code) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int rest = code >= 10000 ? code % 10000 : code % 1000;
  return fmt::format("{}.{}.{}", major, rest / 100, rest % 100);
}

}  // namespace tmpi::check

// File plumbing that every piece shares. Every file trainer-mpi writes goes through
// write_atomic (a temp file in the same folder, fsync, rename), so a reader never sees a
// half-written hostfile or key, and a failed run leaves the old file, or none.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/error.h"

namespace tmpi {

struct FileMode {
  mode_t mode = 0644;
  uid_t uid = static_cast<uid_t>(-1);  // -1: leave as the running uid
  gid_t gid = static_cast<gid_t>(-1);
};

Status write_atomic(const std::string& path, std::string_view content, FileMode mode = {});
Expected<std::string> read_file(const std::string& path, std::size_t max_bytes = 64U << 20);
// A read-only view of a whole file, mapped rather than copied (hostfiles; a pod list, which
// simdjson reads past its end, is read into a PaddedText below).
// Pipes and other non-regular files (`--hostfile <(...)`) are read.
class MappedFile {
 public:
  static Expected<MappedFile> open(const std::string& path, std::size_t max_bytes = 256U << 20);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::string_view text() const { return data_ != nullptr ? std::string_view(data_, size_) : owned_; }

 private:
  MappedFile(const char* data, std::size_t size) : data_(data), size_(size) {}
  explicit MappedFile(std::string owned) : owned_(std::move(owned)) {}
  const char* data_ = nullptr;
  std::size_t size_ = 0;
  std::string owned_;
};

// A whole file in memory with kPadding zero bytes after its end, for a parser that reads
// ahead in blocks (simdjson reads 64 bytes at a time: common/json_filter.h). A regular file
// is mapped, not copied, over a reserved span of zero pages one page longer than the
// padding needs: a 35 MB pod list costs no copy and no page zeroing. Pipes
// (`--pods <(kubectl get pods -o json)`), and files that cannot be mapped, are read.
struct PaddedTextRelease {  // unmaps a mapped span, deletes a buffer
  std::size_t mapped = 0;
  void operator()(char* data) const;
};

class PaddedText {
 public:
  static constexpr std::size_t kPadding = 64;
  static Expected<PaddedText> read(const std::string& path, std::size_t max_bytes = 256U << 20);
  static PaddedText copy(std::string_view text);
  std::string_view text() const { return {data_.get(), size_}; }

 private:
  PaddedText() = default;
  void reserve(std::size_t capacity);
  bool map(int fd, std::size_t size);
  std::unique_ptr<char[], PaddedTextRelease> data_;
  std::size_t size_ = 0, capacity_ = 0;  // capacity_: bytes for text, kPadding more allocated
};

// A private folder for files a run makes and needs only while it runs (hydra's ssh wrapper):
// made by mkdtemp under $TMPDIR (else /tmp), so its name cannot be guessed or taken first,
// mode 0700, and removed with all it holds when the last owner lets it go.
class ScratchDir {
 public:
  static Expected<std::shared_ptr<ScratchDir>> make(std::string_view prefix);
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// mkdir -p, then chmod the last component to `mode`.
Status make_dirs(const std::string& path, mode_t mode = 0755);
bool file_exists(const std::string& path);

}  // namespace tmpi

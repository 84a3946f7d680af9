// See files.h. Errors name the path and say what to fix, since the usual cause is a
// read-only mount or a missing volume in the pod spec.
#include "common/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace tmpi {

namespace {

Error io_error(std::string_view what, const std::string& path, int err) {
  return make_error(Exit::kIo,
                    "cannot {} {}: {}; check that the folder exists, is writable by uid {} "
                    "and is not a read-only mount",
                    what, path, std::strerror(err), getuid());
}

}  // namespace

Status write_atomic(const std::string& path, std::string_view content, FileMode mode) {
  std::string temp = path + ".tmp.XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) return io_error("write", path, errno);
  auto fail = [&](std::string_view what) {
    int err = errno;
    close(fd);
    unlink(temp.c_str());
    return io_error(what, path, err);
  };
  std::size_t written = 0;
  while (written < content.size()) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    written += static_cast<std::size_t>(n);
  }
  if (fchmod(fd, mode.mode) != 0) return fail("chmod");
  if ((mode.uid != static_cast<uid_t>(-1) || mode.gid != static_cast<gid_t>(-1)) &&
      fchown(fd, mode.uid, mode.gid) != 0) {
    return fail("chown");
  }
  if (fsync(fd) != 0) return fail("sync");
  if (close(fd) != 0) {
    int err = errno;
    unlink(temp.c_str());
    return io_error("write", path, err);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(temp.c_str());
    return io_error("replace", path, err);
  }
  return ok_status();
}

namespace {

// An open file and what fstat says of it; the error names the path.
struct OpenFile {
  int fd;
  struct stat st;
};

Expected<OpenFile> open_for_reading(const std::string& path) {
  OpenFile file{open(path.c_str(), O_RDONLY | O_CLOEXEC), {}};
  if (file.fd < 0 || fstat(file.fd, &file.st) != 0) {
    int err = errno;
    if (file.fd >= 0) close(file.fd);
    return make_error(Exit::kIo, "cannot read {}: {}; check the path and its permissions", path,
                      std::strerror(err));
  }
  return file;
}

}  // namespace

Expected<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  TMPI_ASSIGN(OpenFile file, open_for_reading(path));
  int fd = file.fd;
  const struct stat& st = file.st;
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    close(fd);
    return make_error(Exit::kData, "{} is {} bytes, more than the {} this input may have", path, st.st_size,
                      max_bytes);
  }
  // Read to EOF: the size is known for regular files, not for pipes.
  std::string content;
  content.reserve(static_cast<std::size_t>(st.st_size));
  char chunk[65536];
  while (!S_ISDIR(st.st_mode)) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    content.append(chunk, static_cast<std::size_t>(n));
    if (content.size() > max_bytes) {
      close(fd);
      return make_error(Exit::kData, "{} holds more than the {} bytes this input may have", path, max_bytes);
    }
  }
  close(fd);
  if (S_ISDIR(st.st_mode)) return make_error(Exit::kUsage, "{} is a folder; give a file", path);
  return content;
}

Expected<MappedFile> MappedFile::open(const std::string& path, std::size_t max_bytes) {
  TMPI_ASSIGN(OpenFile file, open_for_reading(path));
  int fd = file.fd;
  const struct stat& st = file.st;
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {  // a pipe: read it
    close(fd);
    TMPI_ASSIGN(std::string content, read_file(path, max_bytes));
    return MappedFile(std::move(content));
  }
  auto size = static_cast<std::size_t>(st.st_size);
  if (S_ISDIR(st.st_mode) || size > max_bytes) {
    close(fd);
    return S_ISDIR(st.st_mode)
               ? make_error(Exit::kUsage, "{} is a folder; give a file", path)
               : make_error(Exit::kData, "{} is {} bytes, more than the {} this input may have", path, size,
                            max_bytes);
  }
  if (size == 0) {
    close(fd);
    return MappedFile(nullptr, 0);
  }
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  close(fd);
  if (data == MAP_FAILED) {
    return make_error(Exit::kIo, "cannot map {}: {}", path, std::strerror(errno));
  }
  madvise(data, size, MADV_SEQUENTIAL);
  return MappedFile(static_cast<const char*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), owned_(std::move(other.owned_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
}

void PaddedTextRelease::operator()(char* data) const {
  if (mapped > 0) {
    munmap(data, mapped);
  } else {
    delete[] data;
  }
}

void PaddedText::reserve(std::size_t capacity) {
  std::unique_ptr<char[], PaddedTextRelease> data(new char[capacity + kPadding]);
  if (size_ > 0) std::memcpy(data.get(), data_.get(), size_);
  data_ = std::move(data);
  capacity_ = capacity;
}

// The file's pages (their bytes past the end of the file read as zero) over a reserved span
// of zero pages that reaches kPadding past the end: nothing is read beyond the file's last
// page, so no SIGBUS.
bool PaddedText::map(int fd, std::size_t size) {
  auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::size_t span = (size + kPadding + page - 1) / page * page;
  void* area = mmap(nullptr, span, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return false;
  if (mmap(area, size, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
    munmap(area, span);
    return false;
  }
  madvise(area, size, MADV_SEQUENTIAL);
  data_ = std::unique_ptr<char[], PaddedTextRelease>(static_cast<char*>(area), PaddedTextRelease{span});
  size_ = capacity_ = size;
  return true;
}

PaddedText PaddedText::copy(std::string_view text) {
  PaddedText out;
  out.reserve(text.size());
  if (!text.empty()) std::memcpy(out.data_.get(), text.data(), text.size());
  out.size_ = text.size();
  std::memset(out.data_.get() + out.size_, 0, kPadding);
  return out;
}

Expected<PaddedText> PaddedText::read(const std::string& path, std::size_t max_bytes) {
  TMPI_ASSIGN(OpenFile file, open_for_reading(path));
  std::unique_ptr<int, void (*)(const int*)> closer(&file.fd, [](const int* fd) { close(*fd); });
  const struct stat& st = file.st;
  auto size = static_cast<std::size_t>(st.st_size);
  if (S_ISDIR(st.st_mode)) return make_error(Exit::kUsage, "{} is a folder; give a file", path);
  if (S_ISREG(st.st_mode) && size > max_bytes) {
    return make_error(Exit::kData, "{} is {} bytes, more than the {} this input may have", path, size,
                      max_bytes);
  }
  PaddedText out;
  if (S_ISREG(st.st_mode) && size > 0 && out.map(file.fd, size)) return out;
  // Read: a regular file's size is known, and one byte more lets the read that sees EOF fit
  // without growing the buffer; a pipe's is not, and the buffer doubles as it fills.
  out.reserve(S_ISREG(st.st_mode) ? size + 1 : std::size_t{1} << 16);
  while (true) {
    if (out.size_ == out.capacity_) {
      if (out.size_ > max_bytes) {
        return make_error(Exit::kData, "{} holds more than the {} bytes this input may have", path,
                          max_bytes);
      }
      out.reserve(std::min(out.capacity_ * 2, max_bytes + 1));
    }
    ssize_t n = ::read(file.fd, out.data_.get() + out.size_, out.capacity_ - out.size_);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return make_error(Exit::kIo, "cannot read {}: {}; check the path and its permissions", path,
                        std::strerror(errno));
    }
    if (n == 0) break;
    out.size_ += static_cast<std::size_t>(n);
  }
  if (out.size_ > max_bytes) {
    return make_error(Exit::kData, "{} holds more than the {} bytes this input may have", path, max_bytes);
  }
  std::memset(out.data_.get() + out.size_, 0, kPadding);
  return out;
}

Status make_dirs(const std::string& path, mode_t mode) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return io_error("create folder", path, ec.value());
  if (chmod(path.c_str(), mode) != 0) return io_error("chmod", path, errno);
  return ok_status();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

Expected<std::shared_ptr<ScratchDir>> ScratchDir::make(std::string_view prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  std::string path = fmt::format("{}/{}-XXXXXX", base, prefix);
  if (mkdtemp(path.data()) == nullptr) {
    return make_error(Exit::kIo, "cannot make a private folder in {}: {}; set TMPDIR to a writable folder",
                      base, std::strerror(errno));
  }
  return std::make_shared<ScratchDir>(path);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;  // a destructor cannot fail; what cannot go is left in the pod's /tmp
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace tmpi

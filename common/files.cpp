// See files.h. Errors name the path and say what to fix, since the usual cause is a
// read-only mount or a missing volume in the pod spec.
#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tmpi {

namespace {

Error io_error(std::string_view what, const std::string& path, int err) {
  return make_error(Exit::kUsage, "cannot {} {}: {}; check that the folder exists, is writable by uid {} "
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

Expected<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(Exit::kUsage, "cannot read {}: {}; check the path and its permissions", path,
                      std::strerror(errno));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string content = buffer.str();
  if (content.size() > max_bytes) {
    return make_error(Exit::kUsage, "{} is {} bytes, more than the {} this input may have", path,
                      content.size(), max_bytes);
  }
  return content;
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

}  // namespace tmpi

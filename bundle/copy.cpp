// See copy.h. The file work is plain POSIX (open, read, write, rename); every file is read
// once, hashed (libsodium's SHA-256) while it is written, and read no further than its
// manifest's size allows, so a swollen or damaged file is named, never copied whole.
#include "bundle/copy.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "bundle/manifest.h"
#include "common/files.h"

namespace tmpi::bundle {
namespace {

constexpr std::size_t kChunk = 1U << 20;

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string hex_of(const unsigned char (&digest)[crypto_hash_sha256_BYTES]) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char byte : digest) {
    text.push_back(kDigits[byte >> 4]);
    text.push_back(kDigits[byte & 0xf]);
  }
  return text;
}

Error io_error(const std::string& path, std::string_view doing, int error) {
  return make_error(Exit::kIo,
                    "{}: cannot {}: {}; the volume may be full or read-only (give the emptyDir room)", path,
                    doing, std::strerror(error));
}

Status write_all(int fd, const char* data, std::size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error(path, "write", n < 0 ? errno : ENOSPC);
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return ok_status();
}

// Reads SOURCE (at most the manifest's size and one byte), writes it to TARGET unless TARGET
// is empty, and checks its size and SHA-256 against ENTRY.
Status copy_checked(const std::string& source, const std::string& target, const ManifestEntry& entry) {
  Descriptor in(open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (in.get() < 0) return io_error(source, "open", errno);
  struct stat info {};
  if (fstat(in.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return make_error(Exit::kData, "{}: not a regular file, but the bundle's MANIFEST lists one there",
                      source);
  }
  Descriptor out(target.empty() ? -1 : open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755));
  if (!target.empty() && out.get() < 0) return io_error(target, "create", errno);
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::vector<char> buffer(kChunk);
  std::uint64_t total = 0;
  while (total <= entry.size) {
    ssize_t n = read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(source, "read", errno);
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    crypto_hash_sha256_update(&state, reinterpret_cast<const unsigned char*>(buffer.data()),
                              static_cast<unsigned long long>(n));
    if (out.get() >= 0) TMPI_CHECK(write_all(out.get(), buffer.data(), static_cast<std::size_t>(n), target));
  }
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state, digest);
  if (total != entry.size || hex_of(digest) != entry.sha256) {
    return make_error(Exit::kData,
                      "{}: {} bytes with SHA-256 {}, but the MANIFEST says {} bytes with {}: the "
                      "bundle is damaged; pull trainer-mpi's image again",
                      source, total, hex_of(digest), entry.size, entry.sha256);
  }
  return ok_status();
}

// A bundle's MANIFEST: its text (a copy writes it as it is) and its entries.
struct Manifest {
  std::string text;
  std::vector<ManifestEntry> entries;
};

Expected<Manifest> read_manifest(const std::string& dir) {
  std::string path = dir + "/MANIFEST";
  Manifest manifest;
  TMPI_ASSIGN(manifest.text, read_file(path, kMaxManifestBytes + 1));
  TMPI_ASSIGN(manifest.entries, parse_manifest(manifest.text, path));
  return manifest;
}

Status make_parents(const std::string& root, const std::string& relative) {
  std::error_code error;
  std::filesystem::create_directories(
      std::filesystem::path(root) / std::filesystem::path(relative).parent_path(), error);
  return error ? io_error(root + "/" + relative, "make its folder", error.value()) : ok_status();
}

Status remove_tree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  return error ? io_error(path, "remove", error.value()) : ok_status();
}

void count(CopyStats& stats, const ManifestEntry& entry) {
  if (entry.kind == ManifestEntry::Kind::kLink) {
    ++stats.links;
  } else {
    ++stats.files;
    stats.bytes += entry.size;
  }
}

}  // namespace

Expected<CopyStats> copy_bundle(const std::string& from, const std::string& dest) {
  TMPI_ASSIGN(auto manifest, read_manifest(from));
  // bin/ leaves first and comes back last, so no moment has a runnable half.
  TMPI_CHECK(remove_tree(dest + "/bin"));
  std::string incoming = dest + "/.incoming";
  TMPI_CHECK(remove_tree(incoming));
  CopyStats stats;
  for (const auto& entry : manifest.entries) {
    TMPI_CHECK(make_parents(incoming, entry.path));
    std::string target = incoming + "/" + entry.path;
    if (entry.kind == ManifestEntry::Kind::kLink) {
      if (symlink(entry.target.c_str(), target.c_str()) != 0) return io_error(target, "make the link", errno);
    } else {
      TMPI_CHECK(copy_checked(from + "/" + entry.path, target, entry));
    }
    count(stats, entry);
  }
  TMPI_CHECK(write_atomic(dest + "/MANIFEST", manifest.text));
  for (std::string_view top : kTopFolders) {
    std::string from_incoming = incoming + "/" + std::string(top);
    std::string into = dest + "/" + std::string(top);
    TMPI_CHECK(remove_tree(into));
    if (access(from_incoming.c_str(), F_OK) == 0 && rename(from_incoming.c_str(), into.c_str()) != 0) {
      return io_error(into, "move into place", errno);
    }
  }
  TMPI_CHECK(remove_tree(incoming));
  return stats;
}

Expected<CopyStats> verify_bundle(const std::string& dir) {
  TMPI_ASSIGN(auto manifest, read_manifest(dir));
  CopyStats stats;
  for (const auto& entry : manifest.entries) {
    std::string path = dir + "/" + entry.path;
    if (entry.kind == ManifestEntry::Kind::kLink) {
      std::error_code error;
      auto target = std::filesystem::read_symlink(path, error);
      if (error || target.string() != entry.target) {
        return make_error(Exit::kData, "{}: should be a link to {}: the bundle is damaged; copy it again",
                          path, entry.target);
      }
    } else {
      TMPI_CHECK(copy_checked(path, "", entry));
    }
    count(stats, entry);
  }
  return stats;
}

}  // namespace tmpi::bundle

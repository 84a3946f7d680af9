// See manifest.h. Each line is split on single spaces and each field checked for its shape;
// the first bad line ends the parse, named by its number, with what was expected there.
#include "bundle/manifest.h"

#include <algorithm>
#include <charconv>

namespace tmpi::bundle {
namespace {

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty() && fields.size() < 5) {
    auto space = line.find(' ');
    fields.push_back(line.substr(0, space));
    line = space == std::string_view::npos ? std::string_view{} : line.substr(space + 1);
  }
  return fields;
}

bool printable_without_space(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// A relative path of printable components, none "." or "..", under one of the top folders.
bool bundle_path(std::string_view path) {
  if (!printable_without_space(path) || path.front() == '/' || path.back() == '/') return false;
  std::size_t depth = 0;
  while (!path.empty()) {
    auto slash = path.find('/');
    auto part = path.substr(0, slash);
    if (part.empty() || part == "." || part == "..") return false;
    if (depth == 0 &&
        std::find(std::begin(kTopFolders), std::end(kTopFolders), part) == std::end(kTopFolders)) {
      return false;
    }
    ++depth;
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
  }
  return depth >= 2;
}

// A link's target, read from the link's folder: relative, and never above the bundle.
bool target_inside(std::string_view path, std::string_view target) {
  if (!printable_without_space(target) || target.front() == '/') return false;
  auto depth = static_cast<long>(std::count(path.begin(), path.end(), '/'));  // the link's folder depth
  while (!target.empty()) {
    auto slash = target.find('/');
    auto part = target.substr(0, slash);
    if (part == "..") {
      if (--depth < 0) return false;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
    target = slash == std::string_view::npos ? std::string_view{} : target.substr(slash + 1);
  }
  return depth >= 1;
}

bool sha256_hex(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

Expected<std::vector<ManifestEntry>> parse_manifest(std::string_view text, std::string_view source) {
  if (text.size() > kMaxManifestBytes) {
    return make_error(Exit::kData,
                      "{}: {} bytes, more than a bundle's manifest holds ({}): not a trainer-mpi bundle",
                      source, text.size(), kMaxManifestBytes);
  }
  if (text.empty() || text.back() != '\n') {
    return make_error(Exit::kData,
                      "{}: empty, or its last line is cut short: the bundle was not made whole; "
                      "install it again (cmake --install)",
                      source);
  }
  std::vector<ManifestEntry> entries;
  std::size_t number = 0;
  while (!text.empty()) {
    auto end = text.find('\n');
    auto line = text.substr(0, end);
    text = text.substr(end + 1);
    ++number;
    if (entries.size() == kMaxEntries) {
      return make_error(Exit::kData, "{}: more than {} entries: not a trainer-mpi bundle", source,
                        kMaxEntries);
    }
    auto fields = fields_of(line);
    ManifestEntry entry;
    if (fields.size() == 4 && fields[0] == "f") {
      entry.kind = ManifestEntry::Kind::kFile;
      entry.sha256 = std::string(fields[1]);
      entry.path = std::string(fields[3]);
      auto [rest, error] = std::from_chars(fields[2].data(), fields[2].data() + fields[2].size(), entry.size);
      if (!sha256_hex(fields[1]) || error != std::errc{} || rest != fields[2].data() + fields[2].size() ||
          entry.size > kMaxFileBytes) {
        return make_error(Exit::kData,
                          "{} line {}: wants \"f SHA256 SIZE PATH\" (64 hex digits, a size up to {})", source,
                          number, kMaxFileBytes);
      }
    } else if (fields.size() == 3 && fields[0] == "l") {
      entry.kind = ManifestEntry::Kind::kLink;
      entry.target = std::string(fields[1]);
      entry.path = std::string(fields[2]);
      if (!target_inside(entry.path, entry.target)) {
        return make_error(Exit::kData,
                          "{} line {}: the link's target leaves the bundle, or is not a relative path",
                          source, number);
      }
    } else {
      return make_error(Exit::kData, "{} line {}: wants \"f SHA256 SIZE PATH\" or \"l TARGET PATH\"", source,
                        number);
    }
    if (!bundle_path(entry.path)) {
      return make_error(Exit::kData,
                        "{} line {}: the path is not under bin/, lib/ or libexec/, or has \".\", \"..\" "
                        "or a character outside printable ASCII",
                        source, number);
    }
    if (!entries.empty() && entries.back().path >= entry.path) {
      return make_error(Exit::kData, "{} line {}: out of order or twice ({}): the manifest is sorted by path",
                        source, number, entry.path);
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace tmpi::bundle

// The bundle's manifest and its checked copy (bundle/manifest.h, bundle/copy.h): the shapes
// a manifest may have, and a copy that never leaves a runnable half behind: a damaged file
// is named and nothing of the copy reaches bin/.
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "bundle/copy.h"
#include "bundle/manifest.h"

namespace {

namespace fs = std::filesystem;
using tmpi::Exit;
using tmpi::bundle::copy_bundle;
using tmpi::bundle::ManifestEntry;
using tmpi::bundle::parse_manifest;
using tmpi::bundle::verify_bundle;

const std::string kZeros(64, '0');

TEST(BundleManifest, ReadsFilesAndLinks) {
  auto entries = parse_manifest("l ../libexec/start bin/mpi-sshd\nf " + kZeros +
                                    " 12 lib/glibc/libc.so.6\nf " + kZeros + " 0 libexec/start\n",
                                "MANIFEST");
  ASSERT_TRUE(entries) << entries.error().message;
  ASSERT_EQ(entries->size(), 3U);
  EXPECT_EQ((*entries)[0].kind, ManifestEntry::Kind::kLink);
  EXPECT_EQ((*entries)[0].target, "../libexec/start");
  EXPECT_EQ((*entries)[1].path, "lib/glibc/libc.so.6");
  EXPECT_EQ((*entries)[1].size, 12U);
}

TEST(BundleManifest, RefusesEachBadShapeByLine) {
  const std::string good = "f " + kZeros + " 1 bin/a\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"f " + kZeros + " 1 ../etc/passwd\n", "line 1"},
      {"f " + kZeros + " 1 /etc/passwd\n", "line 1"},
      {"f " + kZeros + " 1 etc/passwd\n", "line 1"},  // not a top folder of a bundle
      {"f " + kZeros + " 1 bin\n", "line 1"},         // a top folder is not a file
      {"f " + kZeros + " 1 bin/./a\n", "line 1"},
      {"f " + kZeros.substr(1) + " 1 bin/a\n", "line 1"},  // 63 digits
      {"f " + std::string(64, 'G') + " 1 bin/a\n", "line 1"},
      {"f " + kZeros + " 99999999999 bin/a\n", "line 1"},  // past a bundle's largest file
      {"f " + kZeros + " -1 bin/a\n", "line 1"},
      {"f " + kZeros + " 1 bin/a b\n", "line 1"},
      {"l ../../../etc bin/a\n", "line 1"},  // a link out of the bundle
      {"l /etc/passwd bin/a\n", "line 1"},
      {"x y z\n", "line 1"},
      {good + good, "line 2"},                          // twice
      {"f " + kZeros + " 1 lib/b\n" + good, "line 2"},  // out of order
      {good + "f " + kZeros + " 1 bin/\xc3\xa9\n", "line 2"},
      {"f " + kZeros + " 1 bin/a", "cut short"},  // no last newline: a manifest written in half
      {"", "empty"},
  };
  for (const auto& [text, named] : bad) {
    auto entries = parse_manifest(text, "B/MANIFEST");
    ASSERT_FALSE(entries) << "accepted: " << text;
    EXPECT_EQ(entries.error().exit, Exit::kData) << text;
    EXPECT_NE(entries.error().message.find("B/MANIFEST"), std::string::npos) << entries.error().message;
    EXPECT_NE(entries.error().message.find(named), std::string::npos) << entries.error().message;
  }
}

TEST(BundleManifest, IsBounded) {
  std::string text;
  for (int i = 0; i <= static_cast<int>(tmpi::bundle::kMaxEntries); ++i) {
    text += "f " + kZeros + " 1 bin/p" + std::to_string(100000 + i) + "\n";
  }
  auto entries = parse_manifest(text, "MANIFEST");
  ASSERT_FALSE(entries);
  EXPECT_NE(entries.error().message.find("more than"), std::string::npos) << entries.error().message;
}

// A small bundle on disk: a program, a library, a link, and its manifest.
class BundleCopy : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tmpi-bundle-test-" + std::to_string(getpid()));
    fs::remove_all(root_);
    from_ = (root_ / "from").string();
    dest_ = (root_ / "dest").string();
    put("libexec/start", "#!/bin/sh\necho start\n");
    put("lib/glibc/libc.so.6", std::string(3 << 20, 'c'));  // spans several reads
    fs::create_directories(from_ + "/bin");
    fs::create_symlink("../libexec/start", from_ + "/bin/mpi-sshd");
    std::ofstream(from_ + "/MANIFEST") << "l ../libexec/start bin/mpi-sshd\n"
                                       << line("lib/glibc/libc.so.6") << line("libexec/start");
  }
  void TearDown() override { fs::remove_all(root_); }

  void put(const std::string& path, const std::string& content) {
    fs::create_directories(fs::path(from_ + "/" + path).parent_path());
    std::ofstream(from_ + "/" + path, std::ios::binary) << content;
    contents_[path] = content;
  }
  std::string line(const std::string& path) {
    const auto& content = contents_[path];
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(content.data()), content.size());
    std::string hex;
    for (unsigned char byte : digest) hex += fmt::format("{:02x}", byte);
    return fmt::format("f {} {} {}\n", hex, content.size(), path);
  }

  fs::path root_;
  std::string from_, dest_;
  std::map<std::string, std::string> contents_;
};

TEST_F(BundleCopy, CopiesEveryFileCheckedAndRunnable) {
  fs::create_directories(dest_ + "/.incoming/bin");  // a copy killed before: replaced
  auto stats = copy_bundle(from_, dest_);
  ASSERT_TRUE(stats) << stats.error().message;
  EXPECT_EQ(stats->files, 2U);
  EXPECT_EQ(stats->links, 1U);
  EXPECT_EQ(stats->bytes, (3U << 20) + 21U);
  EXPECT_EQ(fs::read_symlink(dest_ + "/bin/mpi-sshd"), "../libexec/start");
  EXPECT_EQ(access((dest_ + "/libexec/start").c_str(), X_OK), 0);
  EXPECT_FALSE(fs::exists(dest_ + "/.incoming"));
  auto verified = verify_bundle(dest_);
  ASSERT_TRUE(verified) << verified.error().message;
  EXPECT_EQ(verified->files, 2U);
}

TEST_F(BundleCopy, ADamagedFileIsNamedAndNothingReachesBin) {
  ASSERT_TRUE(copy_bundle(from_, dest_));  // a whole bundle there first: its bin/ goes too
  std::ofstream(from_ + "/lib/glibc/libc.so.6", std::ios::binary | std::ios::app) << "x";  // one byte more
  auto stats = copy_bundle(from_, dest_);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error().exit, Exit::kData);
  EXPECT_NE(stats.error().message.find("lib/glibc/libc.so.6"), std::string::npos) << stats.error().message;
  EXPECT_NE(stats.error().message.find("damaged"), std::string::npos) << stats.error().message;
  EXPECT_FALSE(fs::exists(dest_ + "/bin")) << "a copy that failed left something to run";
}

TEST_F(BundleCopy, VerifyNamesAChangedFileAndAMovedLink) {
  ASSERT_TRUE(copy_bundle(from_, dest_));
  {
    std::fstream file(dest_ + "/libexec/start", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(2);
    file.put('X');  // same size, other bytes
  }
  auto verified = verify_bundle(dest_);
  ASSERT_FALSE(verified);
  EXPECT_NE(verified.error().message.find("libexec/start"), std::string::npos) << verified.error().message;
  ASSERT_TRUE(copy_bundle(from_, dest_));
  fs::remove(dest_ + "/bin/mpi-sshd");
  fs::create_symlink("/bin/sh", dest_ + "/bin/mpi-sshd");
  verified = verify_bundle(dest_);
  ASSERT_FALSE(verified);
  EXPECT_NE(verified.error().message.find("bin/mpi-sshd"), std::string::npos) << verified.error().message;
}

TEST_F(BundleCopy, AMissingManifestIsNamed) {
  fs::remove(from_ + "/MANIFEST");
  auto stats = copy_bundle(from_, dest_);
  ASSERT_FALSE(stats);
  EXPECT_NE(stats.error().message.find("MANIFEST"), std::string::npos) << stats.error().message;
  EXPECT_FALSE(fs::exists(dest_ + "/bin"));
}

}  // namespace

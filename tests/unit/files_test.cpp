// write_atomic: modes, replacement, and no partial file when the write fails.
#include "common/files.h"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace tmpi {
namespace {

std::string temp_dir() {
  std::string dir = std::filesystem::temp_directory_path() / "tmpi-files-XXXXXX";
  return mkdtemp(dir.data());
}

TEST(Files, WriteAtomicSetsModeAndReplaces) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_atomic(dir + "/key", "one", {0600}));
  ASSERT_TRUE(write_atomic(dir + "/key", "two", {0600}));
  struct stat st {};
  ASSERT_EQ(stat((dir + "/key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_EQ(*read_file(dir + "/key"), "two");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "temp file left behind";
  std::filesystem::remove_all(dir);
}

TEST(Files, UnwritableFolderIsAClearErrorAndLeavesNothing) {
  auto status = write_atomic("/proc/tmpi-no/such", "x");
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().exit, Exit::kUsage);
  EXPECT_NE(status.error().message.find("/proc/tmpi-no/such"), std::string::npos);
  EXPECT_NE(status.error().message.find("writable"), std::string::npos);
}

TEST(Files, MakeDirsSetsTheMode) {
  std::string dir = temp_dir();
  ASSERT_TRUE(make_dirs(dir + "/a/b", 0700));
  struct stat st {};
  ASSERT_EQ(stat((dir + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  std::filesystem::remove_all(dir);
}

TEST(Files, ReadFileLimitsSize) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_atomic(dir + "/big", std::string(100, 'x')));
  EXPECT_FALSE(read_file(dir + "/big", 10));
  EXPECT_FALSE(read_file(dir + "/missing"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tmpi

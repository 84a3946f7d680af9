// write_atomic: modes, replacement, and no temporary file left when the replace fails;
// PaddedText: files and pipes read whole, the padding zeroed, the size limit.
#include "common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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

TEST(Files, UnwritableFolderIsAClearError) {
  auto status = write_atomic("/proc/tmpi-no/such", "x");
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().exit, Exit::kIo);
  EXPECT_NE(status.error().message.find("/proc/tmpi-no/such"), std::string::npos);
  EXPECT_NE(status.error().message.find("writable"), std::string::npos);
}

TEST(Files, FailedReplaceLeavesNoTemporaryFile) {
  // The temporary file is written, synced and closed; then the rename onto a folder that
  // holds a file fails (EISDIR), and the file must go with the error.
  std::string dir = temp_dir();
  ASSERT_TRUE(make_dirs(dir + "/target", 0700));
  ASSERT_TRUE(write_atomic(dir + "/target/inside", "keep"));
  auto status = write_atomic(dir + "/target", "content");
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find(dir + "/target"), std::string::npos) << status.error().message;
  EXPECT_NE(status.error().message.find("replace"), std::string::npos) << status.error().message;
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"target"}) << "a temporary file was left behind";
  EXPECT_EQ(*read_file(dir + "/target/inside"), "keep");
  std::filesystem::remove_all(dir);
}

TEST(Files, ScratchDirIsPrivateUnguessableAndGoesWithItsOwner) {
  std::string base = temp_dir();
  const char* old = getenv("TMPDIR");
  std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", base.c_str(), 1);
  auto one = ScratchDir::make("tmpi-ssh");
  auto two = ScratchDir::make("tmpi-ssh");
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_TRUE(one && two);
  std::string path = (*one)->path();
  EXPECT_EQ(path.rfind(base + "/tmpi-ssh-", 0), 0U) << path;
  EXPECT_NE(path, (*two)->path());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  ASSERT_TRUE(write_atomic(path + "/ssh", "#!/bin/sh\n", {0755}));
  one->reset();  // the last owner lets go: the folder and what it holds are gone
  two->reset();
  EXPECT_FALSE(file_exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(base), {}), 0) << "a scratch folder was left";
  setenv("TMPDIR", "/proc/tmpi-no-such", 1);
  auto refused = ScratchDir::make("tmpi-ssh");
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("TMPDIR"), std::string::npos) << refused.error().message;
  std::filesystem::remove_all(base);
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

TEST(Files, PaddedTextReadsFilesAndPipesWithZeroedPadding) {
  std::string dir = temp_dir();
  std::string text(200000, 'x');  // more than one read of a pipe
  ASSERT_TRUE(write_atomic(dir + "/pods.json", text));
  auto file = PaddedText::read(dir + "/pods.json");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->text(), text);
  for (std::size_t i = 0; i < PaddedText::kPadding; ++i) ASSERT_EQ(file->text().data()[text.size() + i], 0);
  std::string pages(2 * 4096, 'y');  // the padding beyond the file's last page: the zero span
  ASSERT_TRUE(write_atomic(dir + "/pages.json", pages));
  auto whole = PaddedText::read(dir + "/pages.json");
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->text(), pages);
  for (std::size_t i = 0; i < PaddedText::kPadding; ++i) ASSERT_EQ(whole->text().data()[pages.size() + i], 0);

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string pipe_path = "/dev/fd/" + std::to_string(fds[0]);
  ASSERT_EQ(write(fds[1], text.data(), 60000), 60000);  // what fits in the pipe's buffer
  close(fds[1]);
  auto piped = PaddedText::read(pipe_path);
  close(fds[0]);
  ASSERT_TRUE(piped) << piped.error().message;
  EXPECT_EQ(piped->text(), text.substr(0, 60000));

  auto big = PaddedText::read(dir + "/pods.json", 1000);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("more than the 1000"), std::string::npos) << big.error().message;
  EXPECT_FALSE(PaddedText::read(dir + "/missing"));
  EXPECT_FALSE(PaddedText::read(dir));
  EXPECT_EQ(PaddedText::copy("").text(), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tmpi

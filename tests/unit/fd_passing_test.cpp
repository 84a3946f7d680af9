// Descriptors passed over a Unix socket (common/fd_passing.h): they arrive with their bytes,
// close-on-exec, in order; more than the bound is refused on the way out, and a message the
// kernel had to cut on the way in is said.
#include "common/fd_passing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace tmpi {
namespace {

struct SocketPair {
  int ends[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0); }
  ~SocketPair() {
    close(ends[0]);
    close(ends[1]);
  }
};

TEST(FdPassing, TheDescriptorsArriveWithTheirBytesInOrderAndCloseOnExec) {
  SocketPair pair;
  int pipe_ends[2] = {-1, -1};
  ASSERT_EQ(pipe(pipe_ends), 0);  // no O_CLOEXEC: the received copies must have it all the same
  const std::array<int, 2> fds{pipe_ends[0], pipe_ends[1]};
  ASSERT_EQ(send_with_fds(pair.ends[0], "hello", 5, fds, MSG_NOSIGNAL), 5);
  std::array<char, 16> buffer{};
  Received got = receive_with_fds(pair.ends[1], buffer.data(), buffer.size(), 0);
  ASSERT_EQ(got.bytes, 5);
  EXPECT_EQ(std::string(buffer.data(), 5), "hello");
  EXPECT_FALSE(got.truncated);
  ASSERT_EQ(got.fds.size(), 2U);
  for (int fd : got.fds) EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "descriptor " << fd;
  // The first received is the pipe's read end: what the second (its write end) writes, it reads.
  ASSERT_EQ(write(got.fds[1], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(got.fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  for (int fd : got.fds) close(fd);
  close(pipe_ends[0]);
  close(pipe_ends[1]);
}

TEST(FdPassing, PastTheBoundNoneIsSentAndACutMessageIsSaid) {
  SocketPair pair;
  std::vector<int> many(kMaxPassedFds + 1, 0);  // stdin, more times than allowed
  errno = 0;
  EXPECT_EQ(send_with_fds(pair.ends[0], "x", 1, many, MSG_NOSIGNAL), -1);
  EXPECT_EQ(errno, EINVAL);
  // Sent by hand, past what the receiver makes room for: the kernel cuts it, and says so.
  std::vector<int> fds(kMaxPassedFds + 4, 0);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  char byte = 'y';
  iovec part{&byte, 1};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  ASSERT_EQ(sendmsg(pair.ends[0], &message, MSG_NOSIGNAL), 1);
  char got_byte = 0;
  Received got = receive_with_fds(pair.ends[1], &got_byte, 1, 0);
  EXPECT_EQ(got.bytes, 1);
  EXPECT_TRUE(got.truncated);
  EXPECT_LE(got.fds.size(), kMaxPassedFds);
  for (int fd : got.fds) close(fd);
}

}  // namespace
}  // namespace tmpi

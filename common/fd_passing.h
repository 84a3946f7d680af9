// Descriptors passed between processes over a Unix socket (SCM_RIGHTS), one way everywhere:
// mpi-ssh hands its stdin, stdout and stderr to the launcher's relay (ssh/), the listener of
// mpi-sshd hands an accepted socket to its spare connection process, and the monitor hands a
// command's descriptors to its session process (nodessh/). The control message's layout is
// the kernel's (cmsg(3)); what each side expects of the count is its own, so receive() keeps
// every descriptor that came, and the caller closes what it does not take.
//
// Every descriptor received is close-on-exec (MSG_CMSG_CLOEXEC): none leaks into a command
// between its arrival and its owner's decision. A control message that the kernel had to cut
// (MSG_CTRUNC: more descriptors than room) is said, so that the caller refuses the message.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <vector>

namespace tmpi {

inline constexpr std::size_t kMaxPassedFds = 16;

// sendmsg(2) of `size` bytes of `data`, `fds` riding with the first byte (at most
// kMaxPassedFds; none is sent past that, and -1 is returned with errno EINVAL). Returns what
// sendmsg returned: the bytes taken, or -1 with errno (EINTR included: the caller retries).
ssize_t send_with_fds(int socket, const void* data, std::size_t size, std::span<const int> fds, int flags);

struct Received {
  ssize_t bytes = -1;      // recvmsg's result: -1 with errno, 0 at the end
  std::vector<int> fds;    // every descriptor that came with them, in order
  bool truncated = false;  // the kernel cut the control data: descriptors were lost
};
// recvmsg(2) of at most `size` bytes into `data`, with up to kMaxPassedFds descriptors.
Received receive_with_fds(int socket, void* data, std::size_t size, int flags);

}  // namespace tmpi

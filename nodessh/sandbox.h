// The session process's sandbox: a seccomp filter it installs on itself before it reads a
// byte of its client (connection_process.cpp), so that whoever takes that process over
// through libssh's parsing cannot reach what the connection's monitor keeps from it.
//
// What it refuses (EPERM, so that a refused call fails where it is made and the process goes
// on, and the hook below can name it): running a program (execve, execveat), opening a file
// (open, openat, openat2, creat, open_by_handle_at; and io_uring, which opens files without
// those calls), a new socket (socket, socketpair), reading or writing another process
// (ptrace, process_vm_readv, process_vm_writev), a signal to any process but itself (kill,
// tkill, tgkill: allowed only towards its own pid), a new process (fork, vfork, clone
// without CLONE_THREAD; clone3, whose flags a filter cannot read, answers ENOSYS), and
// kernel interfaces no session needs (bpf, perf_event_open, userfaultfd, keyctl, add_key,
// request_key). A system call of another architecture (i386's
// int 0x80, x32) kills the process: libseccomp's filter lets only the native one in.
//
// Why a deny-list: what is to be kept out is a short list, and what a session legitimately
// calls is long and not ours (glibc 2.36's in the bundle, OpenSSL's, libssh's, and the
// sanitizers' runtime in the asan preset: mmap variants, madvise, sigaltstack, rseq,
// getrandom...); an allow-list that missed one of those would kill sessions far from here.
// Why seccomp: under Pod Security "restricted" (no_new_privs, no capability, any uid) it is
// the one confinement a process may put on itself: no setuid, chroot or user namespace.
//
// The monitor, which starts the commands, is the parent and never installs it; the filter is
// inherited only downwards, so commands are never under it.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "common/error.h"

namespace tmpi::nodessh {

// The filter's program, compiled once by libseccomp in the listener; each session process
// enters it with its own pid where the rules on signals name "itself".
class SessionFilter {
 public:
  // An error names what libseccomp refused.
  static Expected<SessionFilter> build();
  // Installs the filter on the calling process (with no_new_privs, which the kernel requires
  // of an unprivileged filter, and not dumpable). An error names what the kernel refused.
  Status enter() const;

 private:
  static bool is_own_pid_slot(const sock_filter& op);
  std::vector<sock_filter> program_;
  int own_pid_slots_ = 0;  // where the pid goes (libseccomp shares one compare among the calls)
};

// For the cluster tests only: when MPI_SSHD_SANDBOX_PROBE names a file (the job key), the
// session process tries, once inside the sandbox and before the key exchange, to open it, to
// run /bin/true, and to open a socket, and logs each refusal (or, were the sandbox broken,
// that the call went through). Read from the environment, not a flag: no person has a use
// for it, and --help does not show it. True when it probed (the caller then asks the monitor
// for a command before login, which must be refused too).
bool probe_session_sandbox();

}  // namespace tmpi::nodessh

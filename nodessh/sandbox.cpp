// See sandbox.h. The rules are libseccomp's (seccomp_rule_add): its filter checks the
// architecture and the x32 bit before any rule, which a hand-written BPF program must get
// right itself. libseccomp compiles its rules at each seccomp_load (0.4 ms of a connection's
// 8 on a shared 2-core VM); so the listener compiles them once (seccomp_export_bpf) and each
// session process loads that program itself, its own pid written where the rules name it.
#include "nodessh/sandbox.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

namespace tmpi::nodessh {

namespace {

struct FilterFree {
  void operator()(scmp_filter_ctx filter) const { seccomp_release(filter); }
};

constexpr int kRefusedCalls[] = {
    SCMP_SYS(execve),
    SCMP_SYS(execveat),
    SCMP_SYS(open),
    SCMP_SYS(openat),
    SCMP_SYS(openat2),
    SCMP_SYS(creat),
    SCMP_SYS(open_by_handle_at),
    SCMP_SYS(io_uring_setup),
    SCMP_SYS(io_uring_enter),
    SCMP_SYS(io_uring_register),
    SCMP_SYS(socket),
    SCMP_SYS(socketpair),
    SCMP_SYS(ptrace),
    SCMP_SYS(process_vm_readv),
    SCMP_SYS(process_vm_writev),
    SCMP_SYS(fork),
    SCMP_SYS(vfork),
    SCMP_SYS(bpf),
    SCMP_SYS(perf_event_open),
    SCMP_SYS(userfaultfd),
    SCMP_SYS(keyctl),
    SCMP_SYS(add_key),
    SCMP_SYS(request_key),
    // Other processes of the uid (the listener, the ranks, a logged-in session's commands):
    // reached by a pid descriptor, or moved, throttled or compared.
    SCMP_SYS(pidfd_open),
    SCMP_SYS(pidfd_send_signal),
    SCMP_SYS(pidfd_getfd),
    SCMP_SYS(process_madvise),
    SCMP_SYS(kcmp),
    SCMP_SYS(migrate_pages),
    SCMP_SYS(move_pages),
    SCMP_SYS(ioprio_set),
    SCMP_SYS(sched_setaffinity),
    SCMP_SYS(sched_setscheduler),
    SCMP_SYS(sched_setparam),
    SCMP_SYS(sched_setattr),
    // The file tree by path (the job key, hosts.json, checkpoints, the bundle): no open, and no
    // change either.
    SCMP_SYS(unlink),
    SCMP_SYS(unlinkat),
    SCMP_SYS(rename),
    SCMP_SYS(renameat),
    SCMP_SYS(renameat2),
    SCMP_SYS(truncate),
    SCMP_SYS(link),
    SCMP_SYS(linkat),
    SCMP_SYS(symlink),
    SCMP_SYS(symlinkat),
    SCMP_SYS(mkdir),
    SCMP_SYS(mkdirat),
    SCMP_SYS(rmdir),
    SCMP_SYS(mknod),
    SCMP_SYS(mknodat),
    SCMP_SYS(chmod),
    SCMP_SYS(fchmodat),
    SCMP_SYS(chown),
    SCMP_SYS(lchown),
    SCMP_SYS(fchownat),
    SCMP_SYS(utime),
    SCMP_SYS(utimes),
    SCMP_SYS(utimensat),
    SCMP_SYS(futimesat),
    SCMP_SYS(setxattr),
    SCMP_SYS(lsetxattr),
    SCMP_SYS(removexattr),
    SCMP_SYS(lremovexattr),
    SCMP_SYS(name_to_handle_at),
    // Namespaces and mounts.
    SCMP_SYS(unshare),
    SCMP_SYS(setns),
    SCMP_SYS(mount),
    SCMP_SYS(umount2),
    SCMP_SYS(pivot_root),
    SCMP_SYS(chroot),
};

// A call refused when one argument equals a value: the fcntl and ioctl requests that name a
// process (group) to be signalled when the client's socket is ready (F_SETOWN, FIOSETOWN: the
// kernel then signals it for whoever set it).
struct RefusedRequest {
  int call;
  scmp_datum_t request;
};
constexpr RefusedRequest kRefusedRequests[] = {
    {SCMP_SYS(fcntl), F_SETOWN},  {SCMP_SYS(fcntl), F_SETOWN_EX}, {SCMP_SYS(fcntl), F_SETSIG},
    {SCMP_SYS(ioctl), FIOSETOWN}, {SCMP_SYS(ioctl), SIOCSPGRP},
};

}  // namespace

// Where each session process's own pid goes in the rules that let it signal only itself: no
// pid is this large (the kernel's PID_MAX_LIMIT is 2^22), and no other constant of the
// program is this one.
constexpr std::uint32_t kOwnPid = 0x5e55105d;

Expected<SessionFilter> SessionFilter::build() {
  std::unique_ptr<void, FilterFree> filter(seccomp_init(SCMP_ACT_ALLOW));
  if (!filter) return make_error(Exit::kOsErr, "libseccomp could not make a filter");
  const auto refuse = SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  for (int call : kRefusedCalls) rc = rc != 0 ? rc : seccomp_rule_add(filter.get(), refuse, call, 0);
  // A signal to itself only (raise, abort, the sanitizers' own reports): kill and tgkill whose
  // pid is not its own, tkill whose thread is not its own (one thread: its pid).
  for (int call : {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(tkill), SCMP_SYS(rt_sigqueueinfo),
                   SCMP_SYS(rt_tgsigqueueinfo)}) {
    if (rc == 0)
      rc = seccomp_rule_add(filter.get(), refuse, call, 1, scmp_arg_cmp{0, SCMP_CMP_NE, kOwnPid, 0});
  }
  for (const auto& [call, request] : kRefusedRequests) {
    if (rc == 0)
      rc = seccomp_rule_add(filter.get(), refuse, call, 1, scmp_arg_cmp{1, SCMP_CMP_EQ, request, 0});
  }
  // Limits and priority of itself only (glibc's setrlimit and nice name pid 0): prlimit64 that
  // sets (a new limit given) for another pid, setpriority for any "who" but 0.
  if (rc == 0)
    rc = seccomp_rule_add(filter.get(), refuse, SCMP_SYS(prlimit64), 2, scmp_arg_cmp{0, SCMP_CMP_NE, 0, 0},
                          scmp_arg_cmp{2, SCMP_CMP_NE, 0, 0});
  if (rc == 0)
    rc = seccomp_rule_add(filter.get(), refuse, SCMP_SYS(setpriority), 1, scmp_arg_cmp{1, SCMP_CMP_NE, 0, 0});
  // clone3 answers "not here" (ENOSYS), so that glibc's pthread_create falls back to clone,
  // whose flags the filter can read (clone3 passes them in memory): clone makes threads too
  // (CLONE_THREAD); without that flag, a process.
  if (rc == 0) rc = seccomp_rule_add(filter.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc == 0)
    rc = seccomp_rule_add(filter.get(), refuse, SCMP_SYS(clone), 1,
                          scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0});
  if (rc != 0) return make_error(Exit::kSoftware, "libseccomp refused a rule: {}", std::strerror(-rc));
  // The program as seccomp_load would compile and load it (libseccomp's gen_bpf), kept.
  const int memory = memfd_create("mpi-sshd-filter", MFD_CLOEXEC);
  if (memory < 0)
    return make_error(Exit::kOsErr, "no memory file for the seccomp filter: {}", std::strerror(errno));
  rc = seccomp_export_bpf(filter.get(), memory);
  SessionFilter made;
  const off_t size = lseek(memory, 0, SEEK_CUR);
  if (rc == 0 && size > 0 && size % static_cast<off_t>(sizeof(sock_filter)) == 0) {
    made.program_.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
    if (pread(memory, made.program_.data(), static_cast<std::size_t>(size), 0) != size) made.program_.clear();
  }
  close(memory);
  for (const sock_filter& op : made.program_) made.own_pid_slots_ += is_own_pid_slot(op) ? 1 : 0;
  if (made.program_.empty() || made.program_.size() > BPF_MAXINSNS || made.own_pid_slots_ < 1)
    return make_error(Exit::kSoftware, "libseccomp's filter could not be exported ({} instructions)",
                      made.program_.size());
  return made;
}

bool SessionFilter::is_own_pid_slot(const sock_filter& op) {
  return op.code == (BPF_JMP | BPF_JEQ | BPF_K) && op.k == kOwnPid;
}

Status SessionFilter::enter() const {
  // The program with this process's pid in its slots: a copy, since the listener's stays.
  std::vector<sock_filter> own = program_;
  int slots = 0;
  for (sock_filter& op : own) {
    if (!is_own_pid_slot(op)) continue;
    op.k = static_cast<std::uint32_t>(getpid());
    ++slots;
  }
  if (own.empty() || slots != own_pid_slots_)
    return make_error(Exit::kSoftware, "no seccomp filter was built");
  // The kernel takes an unprivileged filter only under no_new_privs; Pod Security
  // "restricted" sets it already (allowPrivilegeEscalation: false), elsewhere it is set here.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return make_error(Exit::kOsErr, "cannot set no_new_privs: {}", std::strerror(errno));
  // Not dumpable: another process of the uid cannot ptrace it, read its memory or take its
  // descriptors (pidfd_getfd), whatever Yama's ptrace_scope says.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return make_error(Exit::kOsErr, "cannot make the session process undumpable: {}", std::strerror(errno));
  sock_fprog program{static_cast<unsigned short>(own.size()), own.data()};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) !=
      0)  // NOLINT(cppcoreguidelines-pro-type-vararg)
    return make_error(Exit::kOsErr, "the kernel refused the seccomp filter: {}", std::strerror(errno));
  return ok_status();
}

bool probe_session_sandbox() {
  const char* target = std::getenv("MPI_SSHD_SANDBOX_PROBE");
  if (target == nullptr || *target == '\0') return false;
  auto tell = [](const char* what, bool went_through) {
    const int error = errno;
    if (went_through) {
      spdlog::error("sandbox probe: {} went through", what);
    } else {
      spdlog::warn("sandbox probe: {} refused: {}", what, std::strerror(error));
    }
  };
  int fd = open(target, O_RDONLY | O_CLOEXEC);
  tell("open of the job key", fd >= 0);
  if (fd >= 0) close(fd);
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  execve("/bin/true", argv, environ);  // returns only when refused
  tell("execve of /bin/true", false);
  int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  tell("a new socket", sock >= 0);
  if (sock >= 0) close(sock);
  // The monitor (its parent) as another process of the uid: signal 0 asks only whether a
  // signal would be let through; a rename onto itself changes nothing where it is allowed.
  siginfo_t info{};
  info.si_code = SI_QUEUE;
  tell("a queued signal to the monitor",
       syscall(SYS_rt_sigqueueinfo, getppid(), 0, &info) == 0);  // NOLINT(cppcoreguidelines-pro-type-vararg)
  tell("a rename of the job key", rename(target, target) == 0);
  tell("a lower priority for the monitor", setpriority(PRIO_PROCESS, static_cast<id_t>(getppid()), 19) == 0);
  tell("a socket's owner for SIGIO",
       fcntl(0, F_SETOWN, getppid()) == 0);  // NOLINT(cppcoreguidelines-pro-type-vararg)
  // And what it must still do: signal itself (its pid where the rules name "itself").
  if (kill(getpid(), 0) == 0) {
    spdlog::warn("sandbox probe: a signal to itself allowed");
  } else {
    spdlog::error("sandbox probe: a signal to itself refused: {}", std::strerror(errno));
  }
  return true;
}

}  // namespace tmpi::nodessh

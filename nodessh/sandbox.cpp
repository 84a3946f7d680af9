// See sandbox.h. The rules are libseccomp's (seccomp_rule_add): its filter checks the
// architecture and the x32 bit before any rule, which a hand-written BPF program must get
// right itself.
#include "nodessh/sandbox.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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
};

}  // namespace

Status enter_session_sandbox() {
  std::unique_ptr<void, FilterFree> filter(seccomp_init(SCMP_ACT_ALLOW));
  if (!filter) return make_error(Exit::kOsErr, "libseccomp could not make a filter");
  const auto refuse = SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  for (int call : kRefusedCalls) rc = rc != 0 ? rc : seccomp_rule_add(filter.get(), refuse, call, 0);
  // A signal to itself only (raise, abort, the sanitizers' own reports): kill and tgkill whose
  // pid is not its own, tkill whose thread is not its own (one thread: its pid).
  const auto self = static_cast<scmp_datum_t>(getpid());
  for (int call : {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(tkill)}) {
    if (rc == 0) rc = seccomp_rule_add(filter.get(), refuse, call, 1, scmp_arg_cmp{0, SCMP_CMP_NE, self, 0});
  }
  // clone3 answers "not here" (ENOSYS), so that glibc's pthread_create falls back to clone,
  // whose flags the filter can read (clone3 passes them in memory): clone makes threads too
  // (CLONE_THREAD); without that flag, a process.
  if (rc == 0) rc = seccomp_rule_add(filter.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc == 0)
    rc = seccomp_rule_add(filter.get(), refuse, SCMP_SYS(clone), 1,
                          scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0});
  if (rc != 0) return make_error(Exit::kSoftware, "libseccomp refused a rule: {}", std::strerror(-rc));
  // The kernel takes an unprivileged filter only under no_new_privs; Pod Security
  // "restricted" sets it already (allowPrivilegeEscalation: false), elsewhere it is set here.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return make_error(Exit::kOsErr, "cannot set no_new_privs: {}", std::strerror(errno));
  rc = seccomp_load(filter.get());
  if (rc != 0)
    return make_error(Exit::kOsErr, "the kernel refused the seccomp filter: {}", std::strerror(-rc));
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
  return true;
}

}  // namespace tmpi::nodessh

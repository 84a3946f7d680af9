// Errors inside trainer-mpi are values: functions return Expected<T> (a T or an Error),
// in the style of ccache and std::expected (which clang 14, our fuzzing compiler, cannot
// use yet). Exceptions are used only at the edge, in main(), by cli::run.
//
// Every Error carries the process exit code it maps to (docs/design.md, Exit codes), and a message that
// names the input, the line or field, and the fix.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

namespace tmpi {

// The documented exit codes (README "Exit codes", generated from exit_table()). The
// programs' own outcomes sit in the sysexits.h range, so that they cannot be mistaken for a
// user's program: its 1 (a Python traceback) or 2 (an argparse error) is passed through
// by mpi-launcher as the rank's own code, and report.json says which side a code is from.
enum class Exit : int {
  kOk = 0,
  kJobFailed = 1,     // the job failed and no rank's own code is known
  kUsage = 64,        // EX_USAGE: a flag, variable or command line is wrong
  kData = 65,         // EX_DATAERR: an input's content is wrong (a file, a Secret, an API answer)
  kUnavailable = 69,  // EX_UNAVAILABLE: the preflight found a broken host or link, or a service is down
  kSoftware = 70,     // EX_SOFTWARE: an internal error (a bug of ours; please report it)
  kOsErr = 71,        // EX_OSERR: the system refused a resource (fork, a pipe, descriptors)
  kIo = 74,           // EX_IOERR: a file could not be read or written (permissions, a full disk)
  kTempFail = 75,     // EX_TEMPFAIL: a timeout or a lost host; may pass on a retry
  kNoPerm = 77,       // EX_NOPERM: the API refused (RBAC), a token was refused, a Secret is not ours
  kConfig = 78,  // EX_CONFIG: the image or the cluster lacks what the job asks for (NCCL, a node that fits)
};

// One row of the exit-code table, shared by every program and the docs.
struct ExitInfo {
  Exit exit;
  std::string_view name;     // short, stable: report.json's exit.name
  std::string_view meaning;  // one line, for the README and --help
  bool retry;                // an infrastructure fault that a restart of the job may cure
};

const std::vector<ExitInfo>& exit_table();
// A code that is not ours but the job's (a rank's own status, 128+N for a signal N), carried
// through an Error to the process's exit as mpirun and srun pass it on.
constexpr Exit job_exit(int code) {
  return static_cast<Exit>(code);
}
// The row of `code`, or nullptr for a code of the user's program (or another process).
const ExitInfo* exit_info(int code);
// The README's exit-code table, as markdown (`mpi-init --exit-codes-markdown`).
std::string exit_codes_markdown();

struct Error {
  Exit exit = Exit::kUsage;
  std::string message;
};

template <typename... Args>
Error make_error(Exit exit, fmt::format_string<Args...> format, Args&&... args) {
  return Error{exit, fmt::format(format, std::forward<Args>(args)...)};
}

// Unit is the value of an Expected that only reports success.
struct Unit {};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<T>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(state_);
  }
  Error&& take_error() {
    assert(!ok());
    return std::get<Error>(std::move(state_));
  }

 private:
  std::variant<T, Error> state_;
};

using Status = Expected<Unit>;
inline Status ok_status() {
  return Unit{};
}

}  // namespace tmpi

#define TMPI_CONCAT_INNER(a, b) a##b
#define TMPI_CONCAT(a, b) TMPI_CONCAT_INNER(a, b)

// TMPI_CHECK(expr): the one check macro. expr yields an Expected; on error, return it.
#define TMPI_CHECK(expr)                                           \
  do {                                                             \
    auto tmpi_check_result = (expr);                               \
    if (!tmpi_check_result) return tmpi_check_result.take_error(); \
  } while (0)

// TMPI_ASSIGN(decl, expr): decl = the value of expr, or return its error.
#define TMPI_ASSIGN(decl, expr) TMPI_ASSIGN_IMPL(TMPI_CONCAT(tmpi_assign_, __LINE__), decl, expr)
#define TMPI_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                      \
  if (!tmp) return tmp.take_error();      \
  decl = std::move(tmp).value()

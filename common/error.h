// Errors inside trainer-mpi are values: functions return Expected<T> (a T or an Error),
// in the style of ccache and std::expected (which clang 14, our fuzzing compiler, cannot
// use yet). Exceptions are used only at the edge, in main(), by cli::run.
//
// Every Error carries the process exit code it maps to (docs/design.md, Exit codes), and a message that
// names the input, the line or field, and the fix.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace tmpi {

// The documented exit codes (README "Exit codes").
enum class Exit : int {
  kOk = 0,
  kJobFailed = 1,  // the user's job failed
  kUsage = 2,      // bad usage or bad input
  kTimeout = 3,    // a rendezvous, wait or check deadline passed
  kPreflight = 4,  // the preflight found a broken host or link
};

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

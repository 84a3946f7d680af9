// See exec_plan.h.
#include "common/exec_plan.h"

#include <unistd.h>  // execvpe, environ (_GNU_SOURCE, which g++ and clang++ define for C++)

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace tmpi::launch {

namespace {

// The variable's name in "NAME=value".
std::string_view name_of(std::string_view entry) {
  return entry.substr(0, entry.find('='));
}

// write(2) all of `text`, or as much as stderr takes; async-signal-safe.
void write_stderr(const char* text, std::size_t size) {
  while (size > 0) {
    ssize_t written = ::write(STDERR_FILENO, text, size);
    if (written <= 0) return;
    text += written;
    size -= static_cast<std::size_t>(written);
  }
}

}  // namespace

ExecPlan::ExecPlan(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
                   const std::optional<std::pair<std::string, std::string>>& last)
    : argv_text_(std::move(argv)) {
  // This process's variables keep their order, less those set anew; then the new ones.
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view name = name_of(*entry);
    if (env.contains(std::string(name)) || (last && last->first == name)) continue;
    env_text_.emplace_back(*entry);
  }
  for (const auto& [name, value] : env) {
    if (last && last->first == name) continue;
    env_text_.push_back(fmt::format("{}={}", name, value));
  }
  if (last) env_text_.push_back(fmt::format("{}={}", last->first, last->second));
  // The pointers are taken once every string is in place: no push_back moves one after.
  for (auto& word : argv_text_) argv_.push_back(word.data());
  argv_.push_back(nullptr);
  for (auto& entry : env_text_) envp_.push_back(entry.data());
  envp_.push_back(nullptr);
  cannot_run_ =
      "mpi-launcher: cannot run " + (argv_text_.empty() ? std::string() : argv_text_.front()) + ": ";
}

void ExecPlan::exec() const noexcept {
  if (!argv_text_.empty()) ::execvpe(argv_[0], argv_.data(), envp_.data());
  const int error = argv_text_.empty() ? ENOENT : errno;
  // strerrordesc_np, not strerror: no locale, no buffer of its own (glibc 2.32+).
  const char* why = ::strerrordesc_np(error);
  if (why == nullptr) why = "unknown error";
  write_stderr(cannot_run_.data(), cannot_run_.size());
  write_stderr(why, std::strlen(why));
  write_stderr("\n", 1);
  ::_exit(127);
}

}  // namespace tmpi::launch

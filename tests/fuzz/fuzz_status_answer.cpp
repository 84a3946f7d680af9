// libFuzzer target: Trainer's status server's answers as the status reporter reads them
// (outside input: the server, or a proxy in front of it). The first line is the status
// code, a space and the Retry-After header; the rest is the body. The reporter's one-line
// description of the answer must stay one bounded line, and the wait it takes from
// Retry-After must lie between its own backoff and its longest wait.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "status/reporter.h"
#include "status/trainer_status.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t line_end = std::min(text.find('\n'), text.size());
  std::string_view status_line = text.substr(0, line_end);
  std::string body(text.substr(std::min(line_end + 1, text.size())));
  std::size_t space = std::min(status_line.find(' '), status_line.size());
  long status = 0;
  std::from_chars(status_line.data(), status_line.data() + space, status);
  std::string retry_after(status_line.substr(std::min(space + 1, status_line.size())));

  std::string described = tmpi::status::describe_answer(status, body);
  if (described.find_first_of("\r\n") != std::string::npos || described.size() > 500) std::abort();

  const tmpi::Millis backoff(500), longest(30000);
  tmpi::Millis wait = tmpi::status::retry_wait(retry_after, backoff, longest);
  if (wait < backoff || wait > longest) std::abort();
  return 0;
}

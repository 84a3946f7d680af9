// The last lines of a rank's stderr, which the rank agent passes through and keeps for its
// exit report (agent/agent.cpp). A class of its own so that its bounds are read in one place.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <deque>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace tmpi::launch {

// The rank's stderr passes through the agent, which keeps its last lines for the exit report,
// bounded in bytes whatever the rank writes: each line to kLineBytes of the rank's bytes as
// they are read, then to kLineBytes of JSON, the form in which the report carries it (a cut
// line ends with "..."), so the report stays far below the coordinator's 64 KiB body limit
// (bounding the raw bytes alone was not enough: 20 lines of escape bytes were 120 KiB). A carriage
// return followed by more text starts the line again, as on a terminal: a progress bar that
// redraws itself with '\r' for hours keeps one line's worth, not every frame (16 MB of frames
// were 19 MB of RSS); "\r\n" ends the line as it is.
class StderrTail {
 public:
  static constexpr std::size_t kLineBytes = 1024;

  explicit StderrTail(std::size_t lines) : lines_(lines) {}
  // One read from fd, written on to our stderr; false at the end of the stream.
  bool pass_through(int fd) {
    char buffer[4096];
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    // Best effort: when our own stderr is gone, the tail is still kept for the report.
    [[maybe_unused]] ssize_t written = write(STDERR_FILENO, buffer, static_cast<std::size_t>(n));
    for (char c : std::string_view(buffer, static_cast<std::size_t>(n))) {
      if (c == '\n') {
        end_line();
        continue;
      }
      if (c == '\r') {  // the line starts again only if more follows: "\r\n" ends it as it is
        carriage_return_ = true;
        continue;
      }
      if (carriage_return_) {
        partial_.clear();
        cut_ = false;
        carriage_return_ = false;
      }
      if (partial_.size() < kLineBytes) {
        partial_ += c;
      } else {
        cut_ = true;
      }
    }
    return true;
  }
  std::string joined() const {
    std::string out;
    for (const auto& line : tail_) out += line + "\n";
    return out;
  }

 private:
  void end_line() {
    tail_.push_back(cut_ ? truncate_json(partial_, kLineBytes - 3) + "..."
                         : truncate_json(partial_, kLineBytes, "..."));
    if (tail_.size() > lines_) tail_.pop_front();
    partial_.clear();
    cut_ = false;
    carriage_return_ = false;
  }

  std::size_t lines_;
  std::deque<std::string> tail_;
  std::string partial_;           // the line being read: kLineBytes at most
  bool cut_ = false;              // the line being read was longer
  bool carriage_return_ = false;  // a '\r' was read: the next character starts the line again
};

}  // namespace tmpi::launch

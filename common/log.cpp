// See log.h. The formatter is the single choke point that every log line passes, which is
// why redaction lives here and not at the call sites.
#include "common/log.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/utf8.h"

namespace tmpi::log {

namespace {

std::string timestamp(spdlog::log_clock::time_point when) {
  auto seconds = std::chrono::system_clock::to_time_t(when);
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03}Z", buffer, millis.count());
}

class Formatter final : public spdlog::formatter {
 public:
  explicit Formatter(bool json) : json_(json) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view payload(msg.payload.data(), msg.payload.size());
    auto level = spdlog::level::to_string_view(msg.level);
    std::string line;
    if (json_) {
      nlohmann::json record = {{"time", timestamp(msg.time)},
                               {"level", std::string_view(level.data(), level.size())},
                               {"program", std::string_view(msg.logger_name.data(), msg.logger_name.size())},
                               {"message", redact(truncate_utf8(payload, kMaxMessageBytes, "..."))}};
      line = dump_json(record) + "\n";
    } else {
      line = fmt::format("{} {} {}: {}\n", timestamp(msg.time),
                         std::string_view(msg.logger_name.data(), msg.logger_name.size()),
                         std::string_view(level.data(), level.size()), printable(payload));
    }
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<Formatter>(json_); }

 private:
  bool json_;
};

}  // namespace

namespace {

// Where `text` at `at` starts "[A-Z0-9 ]*PRIVATE KEY-----", the index just past it, else npos.
std::size_t after_key_label(std::string_view text, std::size_t at) {
  constexpr std::string_view kTail = "PRIVATE KEY-----";
  for (std::size_t i = at; i < text.size(); ++i) {
    if (text.compare(i, kTail.size(), kTail) == 0) return i + kTail.size();
    char c = text[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ')) return std::string_view::npos;
  }
  return std::string_view::npos;
}

bool token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("._~+/=-").find(c) != std::string_view::npos;
}

bool space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// PEM private key blocks, from their BEGIN line to their END line (or the end of the text).
// Every byte is looked at a bounded number of times: the search only moves forward.
std::string redact_keys(std::string_view text) {
  constexpr std::string_view kBegin = "-----BEGIN ", kEnd = "-----END ";
  constexpr auto npos = std::string_view::npos;
  std::string out;
  std::size_t from = 0, search = 0;
  for (;;) {
    std::size_t at = text.find(kBegin, search);
    if (at == npos) break;
    std::size_t body = after_key_label(text, at + kBegin.size());
    if (body == npos) {
      search = at + 1;
      continue;
    }
    std::size_t end = text.size();
    for (std::size_t e = text.find(kEnd, body); e != npos; e = text.find(kEnd, e + 1)) {
      if (std::size_t past = after_key_label(text, e + kEnd.size()); past != npos) {
        end = past;
        break;
      }
    }
    out.append(text.substr(from, at - from));
    out += "[redacted private key]";
    from = search = end;
  }
  out.append(text.substr(from));
  return out;
}

// "Bearer <token>" (or "bearer"): the word stays, the token goes.
std::string redact_bearer(std::string_view text) {
  constexpr std::string_view kWord = "earer";
  std::string out;
  std::size_t from = 0, search = 1;
  for (;;) {
    std::size_t at = text.find(kWord, search);
    if (at == std::string_view::npos) break;
    search = at + 1;
    if (at - 1 < from || (text[at - 1] != 'B' && text[at - 1] != 'b')) continue;
    std::size_t i = at + kWord.size();
    while (i < text.size() && space(text[i])) ++i;
    if (i == at + kWord.size()) continue;
    std::size_t token = i;
    while (i < text.size() && token_char(text[i])) ++i;
    if (i == token) continue;
    out.append(text.substr(from, at + kWord.size() - from));
    out += " [redacted]";
    from = search = i;
  }
  out.append(text.substr(from));
  return out;
}

}  // namespace

std::string redact(std::string_view text) {
  return redact_bearer(redact_keys(text));
}

std::string printable(std::string_view message) {
  std::string text = redact(message);
  std::string out;
  out.reserve(std::min(text.size(), kMaxMessageBytes) + 16);
  std::size_t at = 0;
  while (at < text.size() && at < kMaxMessageBytes) {
    auto c = static_cast<unsigned char>(text[at]);
    std::size_t length = utf8_sequence_at(text, at);
    if (c == '\n') {
      out += '\n';
      out += kContinuation;
    } else if (c == '\t') {
      out += '\t';
    } else if (length == 0 || c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);  // a control character, or a byte of no character
      length = 1;
    } else {
      out.append(text, at, length);
    }
    at += length == 0 ? 1 : length;
  }
  if (at < text.size()) out += fmt::format("... ({} more bytes)", text.size() - at);
  return out;
}

Status setup(std::string_view program, std::string_view level, LogFormat format) {
  auto logger = std::make_shared<spdlog::logger>(std::string(program),
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::make_unique<Formatter>(format == LogFormat::kJson));
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return ok_status();
}

Status setup_from(std::string_view program, const Params& params) {
  TMPI_CHECK(
      setup(program, params.str(param::kLogLevel), params.choice(param::kLogFormat, kLogFormatSpellings)));
  for (const auto& line : params.env_overrides()) spdlog::debug("setting {}", line);
  return ok_status();
}

}  // namespace tmpi::log

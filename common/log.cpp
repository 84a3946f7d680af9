// See log.h. The formatter is the single choke point that every log line passes, which is
// why redaction lives here and not at the call sites.
#include "common/log.h"

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <regex>

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
    std::string text = redact(std::string_view(msg.payload.data(), msg.payload.size()));
    auto level = spdlog::level::to_string_view(msg.level);
    std::string line;
    if (json_) {
      nlohmann::json record = {{"time", timestamp(msg.time)},
                               {"level", std::string_view(level.data(), level.size())},
                               {"program", std::string_view(msg.logger_name.data(), msg.logger_name.size())},
                               {"message", text}};
      line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else {
      line = fmt::format("{} {} {}: {}\n", timestamp(msg.time),
                         std::string_view(msg.logger_name.data(), msg.logger_name.size()),
                         std::string_view(level.data(), level.size()), text);
    }
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<Formatter>(json_); }

 private:
  bool json_;
};

}  // namespace

std::string redact(std::string_view text) {
  static const std::regex private_key(
      "-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\\s\\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)");
  static const std::regex bearer("([Bb]earer)\\s+[A-Za-z0-9._~+/=-]+");
  std::string out = std::regex_replace(std::string(text), private_key, "[redacted private key]");
  return std::regex_replace(out, bearer, "$1 [redacted]");
}

Status setup(std::string_view program, std::string_view level, std::string_view format) {
  auto logger = std::make_shared<spdlog::logger>(std::string(program),
                                                  std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::make_unique<Formatter>(format == "json"));
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return ok_status();
}

Status setup_from(std::string_view program, const Params& params) {
  TMPI_CHECK(setup(program, params.str("log-level"), params.str("log-format")));
  for (const auto& line : params.env_overrides()) spdlog::debug("setting {}", line);
  return ok_status();
}

}  // namespace tmpi::log

// Logging: secrets are redacted whatever the caller passes; JSON lines parse.
#include "common/log.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace tmpi {
namespace {

TEST(Redact, PrivateKeyBlocksAndBearerTokens) {
  std::string key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE "
      "KEY-----";
  std::string out = log::redact("got " + key + " and Authorization: Bearer eyJhbGciOi.x-y_z ok");
  EXPECT_EQ(out.find("b3BlbnNzaC1rZXkt"), std::string::npos) << out;
  EXPECT_EQ(out.find("eyJhbGciOi"), std::string::npos) << out;
  EXPECT_NE(out.find("[redacted private key]"), std::string::npos);
  EXPECT_NE(out.find("Bearer [redacted]"), std::string::npos);
  EXPECT_NE(out.find(" ok"), std::string::npos);
  // A truncated block is still redacted to the end.
  EXPECT_EQ(log::redact("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE").find("MHcC"), std::string::npos);
}

TEST(Redact, LinearOnHostileInputWithoutRecursion) {
  // A regex engine that recursed once per character overflowed the stack on 64 KB of one
  // field (the host name of a registration): a crash of the launcher from one request.
  std::string bomb(4U << 20, 'A');
  std::string unclosed = "-----BEGIN RSA PRIVATE KEY-----" + bomb;
  EXPECT_EQ(log::redact(unclosed), "[redacted private key]");
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "-----BEGIN X -----END X Bearer ";
  EXPECT_EQ(log::redact(many).size(), many.size());  // nothing to redact: the text as it was
  EXPECT_EQ(log::redact("Bearer " + bomb + " tail"), "Bearer [redacted] tail");
  EXPECT_EQ(log::redact("xbearer\t\ttok.en/=x after"), "xbearer [redacted] after");
  EXPECT_EQ(log::redact("Bearer  "), "Bearer  ");  // no token, nothing to hide
  std::string two =
      "a -----BEGIN PRIVATE KEY-----k1-----END PRIVATE KEY----- b "
      "-----BEGIN EC PRIVATE KEY-----k2-----END EC PRIVATE KEY----- c";
  EXPECT_EQ(log::redact(two), "a [redacted private key] b [redacted private key] c");
}

TEST(Printable, NoTextForgesARecordAndEveryMessageIsBounded) {
  std::string forged = "node-0\n2026-11-30T00:00:00.000Z mpi-launcher info: all hosts ready";
  std::string out = log::printable(forged);
  EXPECT_EQ(out, std::string("node-0\n") + std::string(log::kContinuation) +
                     "2026-11-30T00:00:00.000Z mpi-launcher info: all hosts ready");
  EXPECT_EQ(log::printable("a\rb\x1b[31mc\x7f\td"), "a\\x0db\\x1b[31mc\\x7f\td");
  EXPECT_EQ(log::printable("caf\xc3\xa9 \xff\xc3"),
            "caf\xc3\xa9 \\xff\\xc3");  // invalid bytes escaped, é kept
  std::string big = log::printable(std::string(1U << 20, 'x'));
  EXPECT_LE(big.size(), log::kMaxMessageBytes + 64);
  EXPECT_NE(big.find("(1032192 more bytes)"), std::string::npos) << big.substr(big.size() - 40);
  EXPECT_EQ(log::printable("Bearer abc"), "Bearer [redacted]");
}

// Captures what the logger writes to stderr.
std::string capture_stderr(const std::function<void()>& body) {
  std::fflush(stderr);
  int saved = dup(2);
  FILE* sink = std::tmpfile();
  dup2(fileno(sink), 2);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(sink);
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, sink)) > 0;) out.append(buffer, n);
  std::fclose(sink);
  return out;
}

TEST(Log, JsonLinesAreValidAndRedacted) {
  std::string out = capture_stderr([] {
    ASSERT_TRUE(log::setup("test-prog", "info", log::LogFormat::kJson));
    spdlog::info("token Bearer abc.def \"quoted\"");
    spdlog::debug("not shown at info");
  });
  auto record = nlohmann::json::parse(out);
  EXPECT_EQ(record["program"], "test-prog");
  EXPECT_EQ(record["level"], "info");
  EXPECT_EQ(record["message"], "token Bearer [redacted] \"quoted\"");
}

TEST(Log, EnvironmentOverridesAreLoggedAtDebug) {
  auto params = Params::parse(kScopeInit, {}, {{"TMPI_OUT", "/o"}, {"TMPI_LOG_LEVEL", "debug"}});
  ASSERT_TRUE(params);
  std::string out = capture_stderr([&] { ASSERT_TRUE(log::setup_from("test-prog", *params)); });
  EXPECT_NE(out.find("setting out=/o (from TMPI_OUT)"), std::string::npos) << out;
  EXPECT_NE(out.find("test-prog debug:"), std::string::npos) << out;
}

TEST(Log, TextLinesCannotBeForgedOrFlooded) {
  std::string out = capture_stderr([] {
    ASSERT_TRUE(log::setup("test-prog", "info", log::LogFormat::kText));
    spdlog::warn("registration from {}", "evil\n2026-01-01T00:00:00.000Z mpi-launcher info: ok\r");
    spdlog::info("{}", std::string(100000, 'y'));
  });
  std::vector<std::string> lines;
  std::istringstream stream(out);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3U) << out;
  EXPECT_EQ(lines[1],
            std::string(log::kContinuation) + "2026-01-01T00:00:00.000Z mpi-launcher info: ok\\x0d");
  EXPECT_LT(lines[2].size(), log::kMaxMessageBytes + 200);
}

}  // namespace
}  // namespace tmpi

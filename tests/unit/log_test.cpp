// Logging: secrets are redacted whatever the caller passes; JSON lines parse.
#include "common/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <unistd.h>

namespace tmpi {
namespace {

TEST(Redact, PrivateKeyBlocksAndBearerTokens) {
  std::string key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----";
  std::string out = log::redact("got " + key + " and Authorization: Bearer eyJhbGciOi.x-y_z ok");
  EXPECT_EQ(out.find("b3BlbnNzaC1rZXkt"), std::string::npos) << out;
  EXPECT_EQ(out.find("eyJhbGciOi"), std::string::npos) << out;
  EXPECT_NE(out.find("[redacted private key]"), std::string::npos);
  EXPECT_NE(out.find("Bearer [redacted]"), std::string::npos);
  EXPECT_NE(out.find(" ok"), std::string::npos);
  // A truncated block is still redacted to the end.
  EXPECT_EQ(log::redact("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE").find("MHcC"), std::string::npos);
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
    ASSERT_TRUE(log::setup("test-prog", "info", "json"));
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

}  // namespace
}  // namespace tmpi

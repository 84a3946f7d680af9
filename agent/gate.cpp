// See agent/gate.h. One request at a time, each with a 1 s deadline of its own, so that a
// coordinator that stalls costs the agent no more than --lost-after in all.
#include "agent/gate.h"

#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/json_fields.h"
#include "common/plain_http.h"
#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/protocol.h"

namespace tmpi::launch {

namespace {

constexpr Millis kFirstWait(10), kLongestWait(250), kAskTimeout(1000);
// A reason is shown on stderr, and the answer is not trusted to be short.
constexpr std::size_t kMaxReason = 4096;

}  // namespace

GateVerdict wait_for_start(const RankAgentOptions& options, int rank, const std::string& host) {
  const std::string body =
      rdv::signed_body(derive_rendezvous_key(options.private_key), rdv::MayStart{rank, host});
  Backoff backoff(kFirstWait, kLongestWait);
  bool answered = false;
  auto last_answer = Clock::now();
  std::string last_error;
  while (true) {
    auto sent = plain_http("POST", options.coordinator, rdv::kMayStartPath, body, kAskTimeout);
    if (sent && sent->status == 200) {
      nlohmann::json answer = parse_object(sent->body);  // {} for anything but an object
      std::string decision = string_at(answer, "/decision");
      if (decision == "wait") {
        answered = true;
        last_answer = Clock::now();
      } else if (decision == "stop") {
        return {GateAnswer::kStop,
                truncate_utf8(string_at(answer, "/reason", "no reason given"), kMaxReason)};
      } else if (decision == "start") {
        return {GateAnswer::kStart, ""};
      } else {
        return {GateAnswer::kStart,
                fmt::format("the launcher at {} gave an answer this agent does not know ({}); starting",
                            options.coordinator, truncate_utf8(sent->body, 200, "..."))};
      }
    } else if (sent && sent->status >= 500) {  // a server that is there but cannot answer now: ask again
      last_error = fmt::format("HTTP {}", sent->status);
    } else if (sent) {
      return {GateAnswer::kStart,
              fmt::format("the launcher at {} answered HTTP {} to /v1/may-start; starting without its word",
                          options.coordinator, sent->status)};
    } else {
      last_error = sent.error().message;
    }
    if (Clock::now() - last_answer >= options.lost_after) {
      auto seconds = std::chrono::duration_cast<std::chrono::seconds>(options.lost_after).count();
      if (answered) {
        return {GateAnswer::kLost,
                fmt::format("the launcher at {} said to wait, then did not answer for {} s ({})",
                            options.coordinator, seconds, last_error)};
      }
      return {GateAnswer::kStart, fmt::format("the launcher at {} did not answer for {} s ({}); starting "
                                              "without its word",
                                              options.coordinator, seconds, last_error)};
    }
    std::this_thread::sleep_for(backoff.next());
  }
}

}  // namespace tmpi::launch

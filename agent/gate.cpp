// See agent/gate.h. One request at a time, each with a 1 s deadline of its own, so that a
// coordinator that stalls costs the agent no more than --lost-after in all.
#include "agent/gate.h"

#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/backoff.h"
#include "common/params.h"
#include "common/plain_http.h"
#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/protocol.h"

namespace tmpi::launch {

namespace {

constexpr Millis kFirstWait(10), kLongestWait(250), kAskTimeout(1000);

// What one question got: the launcher's verified answer, or why there was none.
struct Asked {
  std::optional<rdv::StartAnswer> answer;
  std::string problem;
};

// One question, with a nonce of its own that the answer must be signed over.
Asked ask(const RankAgentOptions& options, const std::string& key, int rank, const std::string& host) {
  rdv::MayStart question{rank, host, options.epoch, random_nonce()};
  auto sent = plain_http("POST", options.coordinator, rdv::kMayStartPath, rdv::signed_body(key, question),
                         kAskTimeout);
  if (!sent) return {std::nullopt, sent.error().message};
  auto verified =
      rdv::read_answer<rdv::StartAnswer>(key, rdv::Kind::kMayStart, question.nonce, sent->status, sent->body);
  if (!verified) return {std::nullopt, fmt::format("HTTP {}, with no answer that verifies", sent->status)};
  if (const auto* refused = std::get_if<rdv::Refusal>(&*verified))
    return {std::nullopt, fmt::format("HTTP {}: {}", refused->status, refused->why)};
  return {std::get<rdv::StartAnswer>(*verified), ""};
}

}  // namespace

GateVerdict wait_for_start(const RankAgentOptions& options, int rank, const std::string& host) {
  const std::string key = derive_rendezvous_key(options.private_key);
  Backoff backoff(kFirstWait, kLongestWait);
  bool answered = false;
  auto last_answer = Clock::now();
  std::string last_error;
  while (true) {
    Asked asked = ask(options, key, rank, host);
    if (asked.answer) {
      switch (asked.answer->decision) {
        case rdv::Decision::kStart:
          return {GateAnswer::kStart, ""};
        case rdv::Decision::kStop:
          return {GateAnswer::kStop, asked.answer->reason.empty() ? "no reason given" : asked.answer->reason};
        case rdv::Decision::kWait:
          answered = true;
          last_answer = Clock::now();
          break;
      }
    } else {
      last_error = asked.problem;
    }
    if (Clock::now() - last_answer >= options.lost_after) {
      auto seconds = std::chrono::duration_cast<std::chrono::seconds>(options.lost_after).count();
      if (answered) {
        return {GateAnswer::kLost,
                fmt::format("the launcher at {} said to wait, then did not answer for {} s ({})",
                            options.coordinator, seconds, last_error)};
      }
      if (options.gate_fail_open) {
        return {GateAnswer::kStart,
                fmt::format("the launcher at {} did not answer for {} s ({}); starting "
                            "without its word, as {} says",
                            options.coordinator, seconds, last_error, env_name(param::kGateFailOpen.name))};
      }
      return {GateAnswer::kLost,
              fmt::format("the start gate at {} gave no answer that verifies for {} s ({}); set {}=true to "
                          "start ranks without it",
                          options.coordinator, seconds, last_error, env_name(param::kGateFailOpen.name))};
    }
    std::this_thread::sleep_for(backoff.next());
  }
}

}  // namespace tmpi::launch

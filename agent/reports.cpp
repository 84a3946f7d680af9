// See agent/reports.h.
#include "agent/reports.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/choice.h"
#include "common/job_key.h"
#include "common/plain_http.h"
#include "common/proof.h"

namespace tmpi::launch {

using rdv::kRankBeatPath;
using rdv::kRankPath;
using rdv::RankBeat;
using rdv::RankReport;
using rdv::signed_body;

std::string hostname() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

namespace {

// A verified answer of the coordinator: a JobState (taken; jobEnded or not), or the 409 of
// another epoch; anything else is no answer.
Heard heard_of(const rdv::Verified<rdv::JobState>& answer) {
  if (answer && std::holds_alternative<rdv::JobState>(*answer))
    return std::get<rdv::JobState>(*answer).job_ended ? Heard::kEnding : Heard::kTaken;
  const auto* refused = answer ? std::get_if<rdv::Refusal>(&*answer) : nullptr;
  if (refused != nullptr && refused->status == 409 && refused->why == rdv::kStaleEpoch)
    return Heard::kSuperseded;
  return Heard::kNotHeard;
}

}  // namespace

bool report(const RankAgentOptions& options, const RankIdentity& id, RankReport message, Millis patience) {
  const Heard heard = tell(options, id, std::move(message), patience);
  return heard == Heard::kTaken || heard == Heard::kEnding;
}

Heard tell(const RankAgentOptions& options, const RankIdentity& id, RankReport message, Millis patience) {
  if (options.coordinator.empty()) return Heard::kNotHeard;
  message.rank = id.rank;
  message.host = hostname();
  message.nonce = random_nonce();
  message.epoch = options.epoch;
  auto since = Clock::now();
  const std::string key = derive_rendezvous_key(options.private_key);
  auto sent = plain_http("POST", options.coordinator, kRankPath, signed_body(key, message), patience);
  const Heard heard = sent ? heard_of(rdv::read_answer<rdv::JobState>(key, rdv::Kind::kRank, message.nonce,
                                                                      sent->status, sent->body))
                           : Heard::kNotHeard;
  const bool taken = heard == Heard::kTaken || heard == Heard::kEnding;
  const std::string_view event = choice_name(message.event, rdv::kRankEventKindSpellings);
  if (!taken) spdlog::warn("rank {}: could not report {} to {}", id.rank, event, options.coordinator);
  spdlog::debug("rank {}: reported {} in {} ms", id.rank, event,
                std::chrono::duration_cast<Millis>(Clock::now() - since).count());
  return heard;
}

Heard beat(const RankAgentOptions& options, const RankIdentity& id, long long seq) {
  if (options.coordinator.empty()) return Heard::kNotHeard;
  const std::string key = derive_rendezvous_key(options.private_key);
  RankBeat message{id.rank, hostname(), seq, options.epoch, random_nonce()};
  auto sent = plain_http("POST", options.coordinator, kRankBeatPath, signed_body(key, message), Millis(1000));
  if (!sent) return Heard::kNotHeard;
  const Heard heard = heard_of(
      rdv::read_answer<rdv::JobState>(key, rdv::Kind::kRankBeat, message.nonce, sent->status, sent->body));
  if (heard == Heard::kNotHeard) spdlog::debug("rank {}: beat {} not taken", id.rank, seq);
  return heard;
}

}  // namespace tmpi::launch

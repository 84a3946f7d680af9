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

bool report(const RankAgentOptions& options, const RankIdentity& id, RankReport message, Millis patience) {
  if (options.coordinator.empty()) return false;
  message.rank = id.rank;
  message.host = hostname();
  message.nonce = random_nonce();
  message.epoch = options.epoch;
  auto since = Clock::now();
  const std::string key = derive_rendezvous_key(options.private_key);
  auto sent = plain_http("POST", options.coordinator, kRankPath, signed_body(key, message), patience);
  bool taken = sent && rdv::job_state_taken(key, rdv::Kind::kRank, message.nonce, sent->status, sent->body);
  const std::string_view event = choice_name(message.event, rdv::kRankEventKindSpellings);
  if (!taken) spdlog::warn("rank {}: could not report {} to {}", id.rank, event, options.coordinator);
  spdlog::debug("rank {}: reported {} in {} ms", id.rank, event,
                std::chrono::duration_cast<Millis>(Clock::now() - since).count());
  return taken;
}

BeatHeard beat(const RankAgentOptions& options, const RankIdentity& id, long long seq) {
  if (options.coordinator.empty()) return BeatHeard::kNotHeard;
  const std::string key = derive_rendezvous_key(options.private_key);
  RankBeat message{id.rank, hostname(), seq, options.epoch, random_nonce()};
  auto sent = plain_http("POST", options.coordinator, kRankBeatPath, signed_body(key, message), Millis(1000));
  if (!sent) return BeatHeard::kNotHeard;
  auto answer =
      rdv::read_answer<rdv::JobState>(key, rdv::Kind::kRankBeat, message.nonce, sent->status, sent->body);
  if (answer && std::holds_alternative<rdv::JobState>(*answer)) return BeatHeard::kTaken;
  const auto* refused = answer ? std::get_if<rdv::Refusal>(&*answer) : nullptr;
  if (refused != nullptr && refused->status == 409 && refused->why == rdv::kStaleEpoch)
    return BeatHeard::kSuperseded;
  spdlog::debug("rank {}: beat {} not taken", id.rank, seq);
  return BeatHeard::kNotHeard;
}

}  // namespace tmpi::launch

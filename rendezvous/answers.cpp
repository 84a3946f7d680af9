// The coordinator's answers (protocol.h): one to_json and one parse per answer, and one
// proof for all of them. The proof covers the kind of request answered, the HTTP status,
// the request's nonce and every field of the answer, so an answer cannot be moved to
// another question, another status (a 200 made a 409) or another client, and a field
// changed on the way breaks it. A client verifies before it reads a single field.
#include <fmt/format.h>

#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/json_read.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

namespace {

using nlohmann::json;
using wire::read;

constexpr std::size_t kMaxAnswerText = 4096;  // a reason or an error is shown, not trusted to be short

std::string answer_proof(std::string_view key, Kind kind, long status, std::string_view nonce, json body) {
  body.erase(kProofField);
  return hmac_hex(key, fmt::format("answer:{}|{}|{}|{}", kind_word(kind), status, nonce, dump_json(body)));
}

std::string sign(std::string_view key, Kind kind, std::string_view nonce, long status, json body) {
  body[kProofField] = answer_proof(key, kind, status, nonce, body);
  return dump_json(body);
}

const char* decision_word(Decision decision) {
  switch (decision) {
    case Decision::kWait:
      return "wait";
    case Decision::kStart:
      return "start";
    case Decision::kStop:
      return "stop";
  }
  return "?";
}

// The typed reads of an answer's body, known to be a signed object: false for a wrong shape.
bool parse(const json& body, Registered& out) {
  std::string barrier;
  bool accepted = false;
  if (!read(body, "accepted", accepted, true) || !accepted || !read(body, "barrier", barrier, true) ||
      !read(body, "beatMillis", out.beat_millis, true) || !read(body, "jobEnded", out.job_ended, true)) {
    return false;
  }
  out.barrier_open = barrier == "open";
  return out.barrier_open || barrier == "waiting";
}
bool parse(const json& body, BeatTaken& out) {
  std::string barrier;
  if (!read(body, "barrier", barrier, true) || !read(body, "jobEnded", out.job_ended, true)) return false;
  out.barrier_open = barrier == "open";
  return out.barrier_open || barrier == "waiting";
}
bool parse(const json& body, JobState& out) {
  return read(body, "jobEnded", out.job_ended, true);
}
bool parse(const json& body, EpochTold& out) {
  return read(body, "epoch", out.epoch, true);
}
bool parse(const json& body, StartAnswer& out) {
  std::string decision;
  if (!read(body, "decision", decision, true) || !read(body, "reason", out.reason, false)) return false;
  out.reason = truncate_utf8(out.reason, kMaxAnswerText);
  for (Decision known : {Decision::kWait, Decision::kStart, Decision::kStop}) {
    if (decision == decision_word(known)) {
      out.decision = known;
      return true;
    }
  }
  return false;
}
bool parse(const json& body, Refusal& out) {
  if (!read(body, "error", out.why, true)) return false;
  out.why = truncate_utf8(out.why, kMaxAnswerText);
  return true;
}

}  // namespace

std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const Registered& answer) {
  return sign(key, kind, nonce, 200,
              {{"accepted", true},
               {"barrier", answer.barrier_open ? "open" : "waiting"},
               {"beatMillis", answer.beat_millis},
               {"jobEnded", answer.job_ended}});
}
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const BeatTaken& answer) {
  return sign(key, kind, nonce, 200,
              {{"barrier", answer.barrier_open ? "open" : "waiting"}, {"jobEnded", answer.job_ended}});
}
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const JobState& answer) {
  return sign(key, kind, nonce, 200, {{"jobEnded", answer.job_ended}});
}
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const EpochTold& answer) {
  return sign(key, kind, nonce, 200, {{"epoch", answer.epoch}});
}
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const StartAnswer& answer) {
  json body = {{"decision", decision_word(answer.decision)}};
  if (!answer.reason.empty()) body["reason"] = answer.reason;
  return sign(key, kind, nonce, 200, body);
}
std::string answer_body(std::string_view key, Kind kind, std::string_view nonce, const Refusal& refusal) {
  return sign(key, kind, nonce, refusal.status, {{"error", refusal.why}});
}

template <typename T>
Verified<T> read_answer(std::string_view key, Kind kind, std::string_view nonce, long status,
                        std::string_view body) {
  json parsed = parse_body(body);
  auto proof = parsed.is_object() ? parsed.find(kProofField) : parsed.end();
  if (!parsed.is_object() || proof == parsed.end() || !proof->is_string() ||
      !proof_matches(answer_proof(key, kind, status, nonce, parsed), proof->get<std::string>())) {
    return std::nullopt;
  }
  if (status != 200) {
    Refusal refusal{static_cast<int>(status), ""};
    if (!parse(parsed, refusal)) return std::nullopt;
    return refusal;
  }
  T answer;
  if (!parse(parsed, answer)) return std::nullopt;
  return answer;
}

bool job_state_taken(std::string_view key, Kind kind, std::string_view nonce, long status,
                     std::string_view body) {
  Verified<JobState> answer = read_answer<JobState>(key, kind, nonce, status, body);
  return answer && std::holds_alternative<JobState>(*answer);
}

template Verified<Registered> read_answer(std::string_view, Kind, std::string_view, long, std::string_view);
template Verified<BeatTaken> read_answer(std::string_view, Kind, std::string_view, long, std::string_view);
template Verified<JobState> read_answer(std::string_view, Kind, std::string_view, long, std::string_view);
template Verified<EpochTold> read_answer(std::string_view, Kind, std::string_view, long, std::string_view);
template Verified<StartAnswer> read_answer(std::string_view, Kind, std::string_view, long, std::string_view);

}  // namespace tmpi::rdv

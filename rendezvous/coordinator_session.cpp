// The coordinator's session: the challenge that tells a sidecar this launch's epoch, the
// check that every signed request carries it (docs/design.md, "The session and its threat
// model"), the end (from loopback only), and the start gate that the agents ask. Split from coordinator.cpp,
// which keeps the registrations, the beats and the reports.
#include <boost/asio/ip/address.hpp>
#include <nlohmann/json.hpp>

#include "rendezvous/coordinator.h"
#include "rendezvous/protocol.h"

namespace tmpi::rdv {

using nlohmann::json;

// A request of another launch (a body captured before a restart, or a sidecar that has not
// heard of the restart yet): signed, so not a stranger's, but not of this session.
std::optional<Reply> Coordinator::stale(const Asker& asker, const std::string& epoch,
                                        const std::string& host) {
  if (epoch == config_.epoch) return std::nullopt;
  return refuse(409, host, kStaleEpoch, asker);
}

Reply Coordinator::hello(const Call& call) {
  json body = parse_body(call.body);
  Parsed<Hello> parsed = parse_hello(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) return refuse(refusal->status, "", refusal->why);
  if (!signed_by(config_.key, Kind::kHello, body)) return refuse(403, "", "bad proof on a challenge");
  return signed_reply(
      200, answer_body(config_.key, Kind::kHello, std::get<Hello>(parsed).nonce, EpochTold{config_.epoch}));
}

bool from_inside_pod(const Call& call) {
  if (call.peer.empty()) return true;
  boost::system::error_code not_an_address;
  auto peer = boost::asio::ip::make_address(call.peer, not_an_address);
  return !not_an_address && peer.is_loopback();
}

// The end stops loss detection for the rest of the job, so it is taken only from this
// process (a call with no peer: the launcher's own) or from loopback (`mpi-rendezvous end`
// beside the coordinator): never from the network, where every key holder could send it.
Reply Coordinator::end(const Call& call) {
  if (!from_inside_pod(call))
    return refuse(403, "",
                  "the end is taken only from loopback: run `mpi-rendezvous end` beside the coordinator");
  json body = parse_body(call.body);
  Parsed<EndJob> parsed = parse_end(body);
  if (std::holds_alternative<Refusal>(parsed) || !signed_by(config_.key, Kind::kEnd, body) ||
      !nonces_.insert(std::get<EndJob>(parsed).nonce).second) {
    return refuse(403, "", "ending the job needs a fresh nonce and a proof");
  }
  const EndJob& message = std::get<EndJob>(parsed);
  if (auto other = stale(Asker{Kind::kEnd, message.nonce}, message.epoch, "")) return *other;
  end_job();
  return signed_reply(200, answer_body(config_.key, Kind::kEnd, message.nonce, JobState{true}));
}

// The start gate (config.gated): closed while the launcher's preflight runs beside the
// launch; the agents ask, and hold their ranks until it opens, or stops them.
Reply Coordinator::may_start(const Call& call) {
  json body = parse_body(call.body);
  Parsed<MayStart> parsed = parse_may_start(body);
  if (const auto* refusal = std::get_if<Refusal>(&parsed)) return refuse(refusal->status, "", refusal->why);
  if (!signed_by(config_.key, Kind::kMayStart, body))
    return refuse(403, std::get<MayStart>(parsed).host, "bad proof on a question to start a rank");
  const MayStart& question = std::get<MayStart>(parsed);
  if (auto other = stale(Asker{Kind::kMayStart, question.nonce}, question.epoch, question.host))
    return *other;
  ++counters_["start_questions"];
  StartAnswer answer{Decision::kStop, "the job has ended"};
  if (!job_ended_) {
    switch (gate_) {
      case StartGate::kOpen:
        answer = {Decision::kStart, ""};
        break;
      case StartGate::kClosed:
        answer = {Decision::kWait, ""};
        break;
      case StartGate::kStopped:
        answer = {Decision::kStop, gate_reason_};
        break;
    }
  }
  return signed_reply(200, answer_body(config_.key, Kind::kMayStart, question.nonce, answer));
}

void Coordinator::open_gate() {
  if (gate_ == StartGate::kClosed) gate_ = StartGate::kOpen;
}

void Coordinator::stop_gate(const std::string& reason) {
  gate_ = StartGate::kStopped;
  gate_reason_ = reason;
}

}  // namespace tmpi::rdv

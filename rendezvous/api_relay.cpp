// See api_relay.h.
#include "rendezvous/api_relay.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "common/utf8.h"

namespace tmpi::rdv {

namespace {

constexpr std::string_view kProofLabel = "api-event|";

std::string proof_over(std::string_view key, const nlohmann::json& unsigned_body) {
  return hmac_hex(key, std::string(kProofLabel) + dump_json(unsigned_body));
}

bool is_hex(const std::string& text, std::size_t length) {
  return text.size() == length && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// An Event reason as the API's own: a letter, then letters and digits, at most 128.
bool is_reason(const std::string& text) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto alnum = [&](char c) { return letter(c) || (c >= '0' && c <= '9'); };
  return !text.empty() && text.size() <= 128 && letter(text[0]) &&
         std::all_of(text.begin(), text.end(), alnum);
}

RelayRefusal bad_shape(const std::string& why) {
  return {400, why + "; a relayed Event is {type, reason, message, nonce, sentAt, proof}"};
}

}  // namespace

std::string relay_event_body(std::string_view rendezvous_key, const RelayedEvent& event,
                             const std::string& nonce, long long sent_at_ms) {
  nlohmann::json body = {{"type", event.type},
                         {"reason", event.reason},
                         {"message", event.message},
                         {"nonce", nonce},
                         {"sentAt", sent_at_ms}};
  body["proof"] = proof_over(rendezvous_key, body);
  return dump_json(body);
}

bool NonceWindow::take(const std::string& nonce, long long now_ms) {
  const long long oldest = now_ms - 2 * kRelayFreshness.count();  // a nonce is valid ±window
  while (!order_.empty() && order_.front().first < oldest) {
    seen_.erase(order_.front().second);
    order_.pop_front();
  }
  if (seen_.size() >= kMaxNonces || seen_.contains(nonce)) return false;
  seen_.insert(nonce);
  order_.emplace_back(now_ms, nonce);
  return true;
}

std::variant<RelayedEvent, RelayRefusal> read_relay_event(std::string_view rendezvous_key,
                                                          const std::string& body, long long now_ms,
                                                          NonceWindow& nonces) {
  if (body.size() > kRelayBodyBytes) return bad_shape(fmt::format("a body of {} bytes", body.size()));
  nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
  if (!request.is_object()) return bad_shape("not a JSON object");
  for (const auto& [field, value] : request.items()) {
    static const std::set<std::string> kFields{"type", "reason", "message", "nonce", "sentAt", "proof"};
    if (!kFields.contains(field))
      return bad_shape(fmt::format("an unknown field \"{}\"", truncate_utf8(field, 40, "...")));
    const bool number = field == "sentAt";
    if (number ? !value.is_number_integer() : !value.is_string())
      return bad_shape(fmt::format("\"{}\" is not {}", field, number ? "an integer" : "a string"));
  }
  if (request.size() != 6) return bad_shape("a field is missing");
  RelayedEvent event{request["type"], request["reason"], request["message"]};
  const std::string nonce = request["nonce"], proof = request["proof"];
  const long long sent_at = request["sentAt"];
  if (!is_hex(proof, 64) || !is_hex(nonce, 32))
    return bad_shape("\"proof\" or \"nonce\" is not lower-case hex");
  nlohmann::json unsigned_body = request;
  unsigned_body.erase("proof");
  if (!proof_matches(proof_over(rendezvous_key, unsigned_body), proof))
    return RelayRefusal{403, "the proof does not hold under this job's key"};
  if (event.type != "Warning" && event.type != "Normal")
    return bad_shape("\"type\" is neither Warning nor Normal");
  if (!is_reason(event.reason)) return bad_shape("\"reason\" is not a word of letters and digits (1 to 128)");
  if (event.message.size() > kRelayMessageBytes || valid_utf8(event.message) != event.message)
    return bad_shape(fmt::format("\"message\" is not UTF-8 of at most {} bytes", kRelayMessageBytes));
  // Said by side, not by difference: a sentAt near the integers' ends would overflow one.
  if (sent_at < now_ms - kRelayFreshness.count())
    return RelayRefusal{
        409, fmt::format("stale: sent over {} ms before the relay's clock", kRelayFreshness.count())};
  if (sent_at > now_ms + kRelayFreshness.count())
    return RelayRefusal{
        409, fmt::format("stale: sent over {} ms after the relay's clock", kRelayFreshness.count())};
  if (!nonces.take(nonce, now_ms)) return RelayRefusal{409, "a nonce already taken: a replay"};
  return event;
}

std::string RelayLimiter::admit(const RelayedEvent& event, long long now_ms) {
  if (last_ms_ >= 0) tokens_ = std::min<double>(kBurst, tokens_ + double(now_ms - last_ms_) / kRefillMs);
  last_ms_ = now_ms;
  std::erase_if(sent_, [&](const auto& entry) { return entry.second < now_ms - kDedupeMs; });
  const std::string text = event.type + "\n" + event.reason + "\n" + event.message;
  if (auto same = sent_.find(text); same != sent_.end())
    return fmt::format("the same Event was sent {} s ago", (now_ms - same->second) / 1000);
  if (tokens_ < 1)
    return fmt::format("more than {} Events, and one per {} s since", kBurst, kRefillMs / 1000);
  tokens_ -= 1;
  sent_[text] = now_ms;
  return "";
}

}  // namespace tmpi::rdv

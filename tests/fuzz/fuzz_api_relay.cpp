// libFuzzer target: a request to the launcher pod's API relay (rendezvous/api_relay.h), as any
// process of the pod may send it. Each input is read twice: as sent, and re-signed under the
// job's key (the proof replaced by the right one) so that the checks behind the proof are
// reached too. Every read must take it or refuse it, never crash or hang; an Event it takes
// has the shape the relay promises the API: a known type, a reason of letters and digits, a
// message of valid UTF-8 within its bound.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "common/proof.h"
#include "common/utf8.h"
#include "rendezvous/api_relay.h"

namespace {

using namespace tmpi::rdv;

constexpr long long kFuzzNow = 1795744503000;

void check(const std::string& key, const std::string& body, NonceWindow& nonces) {
  auto read = read_relay_event(key, body, kFuzzNow, nonces);
  if (const auto* event = std::get_if<RelayedEvent>(&read)) {
    if (event->type != "Warning" && event->type != "Normal") std::abort();
    if (event->reason.empty() || event->reason.size() > 128) std::abort();
    if (event->message.size() > kRelayMessageBytes || tmpi::valid_utf8(event->message) != event->message)
      std::abort();
  } else if (const auto* refusal = std::get_if<RelayRefusal>(&read);
             refusal->status < 400 || refusal->why.empty()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string key = tmpi::derive_rendezvous_key("fuzz");
  static NonceWindow nonces;  // kept across inputs: bounded, whatever comes
  const std::string body(reinterpret_cast<const char*>(data), size);
  check(key, body, nonces);
  nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
  if (request.is_object()) {
    request.erase("proof");
    request["proof"] = tmpi::hmac_hex(key, "api-event|" + tmpi::dump_json(request));
    check(key, tmpi::dump_json(request), nonces);
  }
  return 0;
}

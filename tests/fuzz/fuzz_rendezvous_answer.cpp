// libFuzzer target: an answer as a rendezvous client (the sidecar, the rank agent, the start
// gate, `mpi-rendezvous end`) receives it off the wire. The first byte picks the HTTP status;
// the rest is the body. Every typed read must take it or give nothing, never crash or hang;
// and an answer it takes must be one that the coordinator's own signing makes again.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/proof.h"
#include "rendezvous/protocol.h"

namespace {

using namespace tmpi::rdv;

template <typename T>
void read_as(std::string_view key, Kind kind, long status, std::string_view body) {
  Verified<T> answer = read_answer<T>(key, kind, "fuzz-nonce", status, body);
  if (answer && status == 200 && !std::holds_alternative<T>(*answer)) std::abort();
  if (answer && status != 200 && !std::holds_alternative<Refusal>(*answer)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string key = tmpi::derive_rendezvous_key("fuzz");
  if (size == 0) return 0;
  static constexpr long kStatuses[] = {200, 400, 403, 404, 409, 503};
  long status = kStatuses[data[0] % 6];
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  read_as<Registered>(key, Kind::kRegister, status, body);
  read_as<BeatTaken>(key, Kind::kBeat, status, body);
  read_as<JobState>(key, Kind::kRank, status, body);
  read_as<EpochTold>(key, Kind::kHello, status, body);
  read_as<StartAnswer>(key, Kind::kMayStart, status, body);
  return 0;
}

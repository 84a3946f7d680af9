// The protocol between mpi-sshd's monitor and its session process (nodessh/monitor_protocol.h),
// fed hostile bytes from either side in any cuts: the monitor takes a session process's
// requests as a stranger's (that process parses the client's bytes before login), and the
// session process takes the monitor's. Beyond no crash: whatever decodes re-encodes to the
// bytes it came from, and nothing decodes past a bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nodessh/monitor_protocol.h"

using tmpi::nodessh::MonitorDecoder;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto side = (data[0] & 1) != 0 ? MonitorDecoder::Side::kMonitor : MonitorDecoder::Side::kSession;
  const std::size_t cut = 1 + data[1] % 64;
  std::string_view stream(reinterpret_cast<const char*>(data + 2), size - 2);
  MonitorDecoder decoder(side);
  std::string reencoded;
  std::size_t fed = 0;
  for (std::size_t at = 0; at < stream.size(); at += cut) {
    std::string_view part = stream.substr(at, cut);
    if (!decoder.feed(part)) return 0;
    fed += part.size();
    while (auto message = decoder.next()) {
      if (const auto* start = std::get_if<tmpi::nodessh::StartRequest>(&*message)) {
        if (start->command.argv.size() > tmpi::nodessh::kMaxMonitorArgs ||
            start->command.env.size() > tmpi::nodessh::kMaxMonitorEnv)
          std::abort();
      }
      reencoded += tmpi::nodessh::encode_monitor_message(*message);
    }
  }
  // What decoded is the stream's prefix, byte for byte.
  if (stream.substr(0, reencoded.size()) != reencoded) std::abort();
  (void)fed;
  return 0;
}

// libFuzzer target: the pods of hosts that never came (rendezvous/pod_status.h), both ways in
// from outside: a page of the API's pod list as the sidecar reads it, and the relay's answer
// as the launcher reads it. Every read must take the input or refuse it, never crash or hang;
// what it takes keeps the promised bounds: one summary per host asked, each text valid UTF-8
// within its bound, at most kPodStatusWaiting waiting and ended containers, each exit code
// -1..255; and what the sidecar writes of it, the launcher reads back whole.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "rendezvous/pod_status.h"

namespace {

using namespace tmpi;

bool bounded(const std::string& text, std::size_t max_bytes) {
  return text.size() <= max_bytes && valid_utf8(text) == text;
}

void check(const std::vector<PodStatusSummary>& pods, std::size_t asked) {
  if (pods.size() != asked) std::abort();
  for (const auto& pod : pods) {
    if (!bounded(pod.scheduled_reason, kPodStatusReasonBytes) ||
        !bounded(pod.scheduled_message, kPodStatusMessageBytes) || pod.waiting.size() > kPodStatusWaiting)
      std::abort();
    for (const auto& waiting : pod.waiting)
      if (!bounded(waiting.reason, kPodStatusReasonBytes) ||
          !bounded(waiting.message, kPodStatusMessageBytes))
        std::abort();
    if (pod.ended.size() > kPodStatusWaiting) std::abort();
    for (const auto& ended : pod.ended)
      if (!bounded(ended.reason, kPodStatusReasonBytes) || !bounded(ended.memory_limit, 32) ||
          ended.exit_code < -1 || ended.exit_code > 255)
        std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  PodStatusReader reader({"train-node-0-1.train", "train-node-0-2.train"});
  if (auto next = reader.add(text, "fuzz"); next) {
    auto pods = reader.summaries();
    check(pods, 2);
    auto back = read_pod_statuses(dump_json(pod_statuses_json(pods)));
    if (!back) std::abort();  // what the sidecar writes, the launcher must read
    check(*back, 2);
  }
  if (auto answer = read_pod_statuses(text); answer) check(*answer, answer->size());
  return 0;
}

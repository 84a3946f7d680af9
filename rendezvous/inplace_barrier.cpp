// See inplace_barrier.h. Every answer is outside input (the API server, or whatever stands
// in front of it): its size is bounded before the parse, each field read is checked for its
// type and range, and no text of the answer reaches a message (the fields are named, the
// values are not: they may be anything).
#include "rendezvous/inplace_barrier.h"

#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tmpi::rdv::inplace {

namespace {

using nlohmann::json;

constexpr std::int64_t kMaxAttempt = std::numeric_limits<std::int32_t>::max();

const json* member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

// status.<field>: absent or null is "not yet"; an integer 0..2^31-1 is the value.
Expected<std::optional<std::int32_t>> attempt_field(const json* status, const char* field,
                                                    const std::string& name) {
  const json* value = status == nullptr ? nullptr : member(*status, field);
  if (value == nullptr || value->is_null()) return std::optional<std::int32_t>{};
  bool in_range = (value->is_number_unsigned() && value->get<std::uint64_t>() <= kMaxAttempt) ||
                  (value->is_number_integer() && !value->is_number_unsigned() &&
                   value->get<std::int64_t>() >= 0 && value->get<std::int64_t>() <= kMaxAttempt);
  if (!in_range) {
    return make_error(Exit::kData,
                      "JobSet {}: status.{} is not an integer from 0 to 2147483647; is this JobSet "
                      "v0.11 or later, whose controller writes it?",
                      name, field);
  }
  return std::optional<std::int32_t>{static_cast<std::int32_t>(value->get<std::int64_t>())};
}

}  // namespace

Expected<JobSetView> parse_jobset(const std::string& body, const std::string& name) {
  if (body.size() > kMaxJobSetBytes) {
    return make_error(Exit::kData, "JobSet {}: the answer is over {} MiB; not a JobSet", name,
                      kMaxJobSetBytes >> 20);
  }
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) return make_error(Exit::kData, "JobSet {}: the answer is not a JSON object", name);
  const json* kind = member(doc, "kind");
  const json* meta = member(doc, "metadata");
  const json* got_name = meta == nullptr ? nullptr : member(*meta, "name");
  if (kind == nullptr || *kind != "JobSet" || got_name == nullptr || *got_name != name) {
    return make_error(Exit::kData, "JobSet {}: the answer is not that JobSet (kind, metadata.name)", name);
  }
  JobSetView view;
  if (const json* uid = member(*meta, "uid"); uid != nullptr && uid->is_string() && uid->size() <= 128) {
    view.uid = uid->get<std::string>();
  }
  // J:cmd/in-place-restart-agent/main.go shouldBypassBarrier: the annotation's presence alone.
  const json* annotations = member(*meta, "annotations");
  bool disabled = annotations != nullptr && member(*annotations, kDisableAnnotation) != nullptr;
  const json* spec = member(doc, "spec");
  const json* policy = spec == nullptr ? nullptr : member(*spec, "failurePolicy");
  const json* strategy = policy == nullptr ? nullptr : member(*policy, "restartStrategy");
  bool in_place = strategy != nullptr && *strategy == "InPlaceRestart";
  view.bypass = disabled || !in_place;
  const json* status = member(doc, "status");
  TMPI_ASSIGN(view.current, attempt_field(status, "currentInPlaceRestartAttempt", name));
  TMPI_ASSIGN(view.previous, attempt_field(status, "previousInPlaceRestartAttempt", name));
  return view;
}

Expected<std::int32_t> parse_attempt(const std::string& text) {
  // J:pkg/controllers/in_place_restart.go getPodInPlaceRestartAttempts: Atoi, then >= 0.
  bool digits =
      !text.empty() && text.size() <= 10 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoll(text) > kMaxAttempt) {
    return make_error(Exit::kData, "annotation {} is not a non-negative integer", kAttemptAnnotation);
  }
  return static_cast<std::int32_t>(std::stoll(text));
}

Decision decide(const AgentState& state, const JobSetView& jobset) {
  if (jobset.bypass) {
    // The agent then neither writes nor exits: the barrier means nothing for this JobSet.
    return state.barrier_up ? Decision{Step::kLift, 0, "the JobSet bypasses the in-place barrier"}
                            : Decision{Step::kWait, 0, ""};
  }
  if (!state.attempt) {
    if (!jobset.current) return {Step::kWrite, 0, "first start: attempt 0"};
    if (*jobset.current >= kMaxAttempt) {
      return {Step::kFail, *jobset.current, "the JobSet's in-place attempt is at 2147483647, the last"};
    }
    return {Step::kWrite, *jobset.current + 1,
            fmt::format("joining attempt {} (the JobSet is at {})", *jobset.current + 1, *jobset.current)};
  }
  std::int32_t own = *state.attempt;
  if (jobset.previous && own <= *jobset.previous) {
    return {Step::kRestart, own,
            fmt::format("attempt {} is outdated (the JobSet's previous attempt is {}): restarting", own,
                        *jobset.previous)};
  }
  if (state.barrier_up && jobset.current && *jobset.current == own) {
    return {Step::kLift, own, fmt::format("every pod is at attempt {}: the barrier is down", own)};
  }
  return {Step::kWait, own, ""};
}

std::string attempt_apply_body(const std::string& pod, const std::string& namespace_, std::int32_t attempt) {
  json body = {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata",
                {{"name", pod},
                 {"namespace", namespace_},
                 {"annotations", {{kAttemptAnnotation, std::to_string(attempt)}}}}}};
  return body.dump();
}

}  // namespace tmpi::rdv::inplace

// The in-place restart agent's engine (rendezvous/inplace_barrier.h): each of JobSet v0.12.0's
// agent rules (J:cmd/in-place-restart-agent/main.go Reconcile) with the least input, the
// answers' shapes it refuses, and the protocol played through one pod made again: the
// replacement joins one past the JobSet's attempt, the others are told to restart, rejoin,
// and the barrier lifts for all at the new attempt.
#include "rendezvous/inplace_barrier.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tmpi::rdv::inplace {
namespace {

using nlohmann::json;

json ipr_jobset(json status = json::object(), std::string strategy = "InPlaceRestart") {
  json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
             {"kind", "JobSet"},
             {"metadata", {{"name", "js"}, {"namespace", "ns"}, {"uid", "u-1"}}},
             {"spec", {{"failurePolicy", {{"maxRestarts", 3}, {"restartStrategy", strategy}}}}},
             {"status", status}};
  return js;
}

JobSetView ipr_view(const json& answer) {
  auto parsed = parse_jobset(answer.dump(), "js");
  EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error().message);
  return parsed ? *parsed : JobSetView{};
}

JobSetView ipr_at(std::optional<int> current, std::optional<int> previous = std::nullopt) {
  JobSetView v;
  v.current = current;
  v.previous = previous;
  return v;
}

TEST(InPlaceParse, ReadsTheStrategyTheStatusAndTheUid) {
  JobSetView v =
      ipr_view(ipr_jobset({{"currentInPlaceRestartAttempt", 2}, {"previousInPlaceRestartAttempt", 1}}));
  EXPECT_FALSE(v.bypass);
  EXPECT_EQ(v.current, 2);
  EXPECT_EQ(v.previous, 1);
  EXPECT_EQ(v.uid, "u-1");
  JobSetView fresh = ipr_view(ipr_jobset(json::object()));
  EXPECT_FALSE(fresh.current.has_value());
  EXPECT_FALSE(fresh.previous.has_value());
  json nulls = ipr_jobset({{"currentInPlaceRestartAttempt", nullptr}});
  EXPECT_FALSE(ipr_view(nulls).current.has_value());
  json no_status = ipr_jobset();
  no_status.erase("status");
  EXPECT_FALSE(ipr_view(no_status).current.has_value());
}

TEST(InPlaceParse, BypassedByTheAnnotationAnyValueOrAnotherStrategy) {
  json disabled = ipr_jobset();
  disabled["metadata"]["annotations"] = {{kDisableAnnotation, ""}};
  EXPECT_TRUE(ipr_view(disabled).bypass);
  EXPECT_TRUE(ipr_view(ipr_jobset(json::object(), "Recreate")).bypass);
  json no_policy = ipr_jobset();
  no_policy["spec"].erase("failurePolicy");
  EXPECT_TRUE(ipr_view(no_policy).bypass);
}

TEST(InPlaceParse, RefusesWhatIsNotThatJobSetOrAnAttemptOutOfRange) {
  for (const char* body : {"", "[]", "null", "{\"kind\":\"JobSet\"}", "<html>sign in</html>"}) {
    auto parsed = parse_jobset(body, "js");
    ASSERT_FALSE(parsed) << body;
    EXPECT_EQ(parsed.error().exit, Exit::kData);
  }
  json other = ipr_jobset();
  other["metadata"]["name"] = "another";
  EXPECT_FALSE(parse_jobset(other.dump(), "js"));
  for (json bad : {json(-1), json(2147483648LL), json("1"), json(1.5), json::array()}) {
    auto parsed = parse_jobset(ipr_jobset({{"previousInPlaceRestartAttempt", bad}}).dump(), "js");
    ASSERT_FALSE(parsed) << bad.dump();
    EXPECT_NE(parsed.error().message.find("status.previousInPlaceRestartAttempt"), std::string::npos);
  }
  EXPECT_TRUE(parse_jobset(ipr_jobset({{"currentInPlaceRestartAttempt", 2147483647}}).dump(), "js"));
  EXPECT_FALSE(parse_jobset(std::string(kMaxJobSetBytes + 1, ' '), "js"));
}

TEST(InPlaceParse, TheAnnotationAsTheControllerReadsIt) {
  EXPECT_EQ(*parse_attempt("0"), 0);
  EXPECT_EQ(*parse_attempt("2147483647"), 2147483647);
  for (const char* bad : {"", "-1", "+1", "1.0", " 1", "2147483648", "99999999999", "x"}) {
    EXPECT_FALSE(parse_attempt(bad)) << bad;
  }
}

TEST(InPlaceDecide, FirstStartWritesZeroThenOnePastTheJobSet) {
  AgentState fresh;
  Decision first = decide(fresh, ipr_at(std::nullopt));
  EXPECT_EQ(first.step, Step::kWrite);
  EXPECT_EQ(first.attempt, 0);
  Decision later = decide(fresh, ipr_at(4, 3));
  EXPECT_EQ(later.step, Step::kWrite);
  EXPECT_EQ(later.attempt, 5);
  EXPECT_EQ(decide(fresh, ipr_at(2147483647)).step, Step::kFail);
}

TEST(InPlaceDecide, LiftsAtItsAttemptRestartsWhenOutdatedWaitsOtherwise) {
  AgentState zero{0, true};
  EXPECT_EQ(decide(zero, ipr_at(std::nullopt)).step, Step::kWait);  // the others still writing
  EXPECT_EQ(decide(zero, ipr_at(0)).step, Step::kLift);
  AgentState lifted{0, false};
  EXPECT_EQ(decide(lifted, ipr_at(0)).step, Step::kWait);
  EXPECT_EQ(decide(lifted, ipr_at(0, 0)).step, Step::kRestart);  // after the lift too
  AgentState one{1, true};
  EXPECT_EQ(decide(one, ipr_at(0, 0)).step, Step::kWait);  // the replacement waits for the others
  EXPECT_EQ(decide(one, ipr_at(1, 0)).step, Step::kLift);
  EXPECT_EQ(decide(AgentState{1, false}, ipr_at(3, 2)).step, Step::kRestart);  // far behind: restart too
}

TEST(InPlaceDecide, ABypassLiftsOnceAndNeverWritesNorRestarts) {
  JobSetView bypass = ipr_at(std::nullopt, 5);
  bypass.bypass = true;
  EXPECT_EQ(decide(AgentState{}, bypass).step, Step::kLift);
  EXPECT_EQ(decide(AgentState{std::nullopt, false}, bypass).step, Step::kWait);
  EXPECT_EQ(decide(AgentState{0, false}, bypass).step, Step::kWait);
}

// Three pods' agents and JobSet's controller rule (lift when all agree, else previous = max-1).
TEST(InPlaceDecide, OnePodMadeAgainTheOthersRestartTheirAgentsAndAllLiftTogether) {
  std::vector<AgentState> agents(3);
  std::vector<int> annotation(3, -1);  // the pods' annotations: a restarted agent's stays until rewritten
  JobSetView js = ipr_at(std::nullopt);
  auto controller = [&] {
    int low = annotation[0], high = low;
    for (int a : annotation) {
      low = std::min(low, a);
      high = std::max(high, a);
    }
    if (low == high && low >= 0)
      js.current = high;
    else if (high > 0 && (!js.previous || high - 1 > *js.previous))
      js.previous = high - 1;
  };
  auto round = [&] {
    for (std::size_t i = 0; i < agents.size(); ++i) {
      AgentState& a = agents[i];
      for (Decision d = decide(a, js); d.step != Step::kWait; d = decide(a, js)) {
        if (d.step == Step::kWrite) a.attempt = annotation[i] = d.attempt;
        if (d.step == Step::kLift) a.barrier_up = false;
        if (d.step == Step::kRestart) {
          a = AgentState{};  // the kubelet restarts the container; the new process writes next round
          break;
        }
      }
    }
    controller();
  };
  round();
  round();
  for (const auto& a : agents) EXPECT_FALSE(a.barrier_up);
  EXPECT_EQ(js.current, 0);
  agents[1] = AgentState{};  // pod 1 lost; its replacement (no annotation yet) starts
  annotation[1] = -1;
  round();
  EXPECT_EQ(agents[1].attempt, 1);
  EXPECT_EQ(js.previous, 0);
  EXPECT_TRUE(agents[1].barrier_up);
  round();  // pods 0 and 2 are told to restart,
  round();  // rejoin at 1,
  EXPECT_EQ(js.current, 1);
  round();  // and every barrier lifts
  for (const auto& a : agents) {
    EXPECT_EQ(a.attempt, 1);
    EXPECT_FALSE(a.barrier_up);
  }
}

TEST(InPlaceApply, TheAnnotationAloneUnderThePodsName) {
  json body = json::parse(attempt_apply_body("js-node-0-0-abcde", "ns", 3));
  EXPECT_EQ(body, json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"js-node-0-0-abcde",
    "namespace":"ns","annotations":{"jobset.sigs.k8s.io/in-place-restart-attempt":"3"}}})"));
}

}  // namespace
}  // namespace tmpi::rdv::inplace

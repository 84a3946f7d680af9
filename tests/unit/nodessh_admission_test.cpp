// mpi-sshd's admission (nodessh/admission.h) and the login gate's count of every method that
// is not the job key, driven as a stranger's load and the job's own clients would drive them,
// with a manual time: per-source and total bounds on connections not logged in yet, the oldest
// idle one dropped for a newcomer, logged-in sessions bounded apart and never dropped, and
// OpenSSH 9.8's per-source penalties (srclimit.c) accumulating, activating and running down.
#include <string>

#include <gtest/gtest.h>

#include "nodessh/admission.h"
#include "nodessh/session_rules.h"

namespace tmpi::nodessh {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point kStart{};

// Admits `count` connections from `source` with ids from `first`, and checks each was admitted.
void admit_all(Admission& admission, const std::string& source, pid_t first, int count,
               Clock::time_point now) {
  for (int i = 0; i < count; ++i) {
    Admit decision = admission.on_connect(source, now);
    ASSERT_EQ(decision.kind, Admit::Kind::kAdmit) << source << " #" << i << ": " << decision.refusal;
    admission.admitted(first + i, source, now);
  }
}

TEST(NodeSshAdmission, OneAddressIsBoundedAndNamedWhileOthersComeIn) {
  Admission admission(AdmissionLimits{256, 64, 8});
  admit_all(admission, "10.0.0.66", 100, 8, kStart);
  Admit ninth = admission.on_connect("10.0.0.66", kStart);
  EXPECT_EQ(ninth.kind, Admit::Kind::kRefuse);
  EXPECT_EQ(ninth.reason, "per-source startups");
  EXPECT_NE(
      ninth.refusal.find("10.0.0.66: connection refused: 8 of its connections are not logged in yet, the "
                         "most --sshd-per-source-startups allows"),
      std::string::npos)
      << ninth.refusal;
  EXPECT_EQ(admission.on_connect("10.0.0.5", kStart).kind, Admit::Kind::kAdmit);
}

TEST(NodeSshAdmission, WhenFullTheOldestIdleGoesForANewcomer) {
  Admission admission(AdmissionLimits{256, 4, 4});
  admit_all(admission, "10.0.0.66", 100, 2, kStart);
  admit_all(admission, "10.0.0.67", 200, 2, kStart + milliseconds(10));
  admission.on_banner(100);  // 100 is mid-handshake: 101 is the oldest idle one
  Admit decision = admission.on_connect("10.0.0.5", kStart + milliseconds(20));
  ASSERT_EQ(decision.kind, Admit::Kind::kAdmitDropping);
  EXPECT_EQ(decision.drop, 101);
  admission.admitted(300, "10.0.0.5", kStart + milliseconds(20));
  EXPECT_EQ(admission.starting(), 4);  // the dropped one is no longer counted
  // None idle now but 200 and 201, then none at all: only a stale handshake may go.
  admission.on_banner(200), admission.on_banner(201), admission.on_banner(300);
  Admit refused = admission.on_connect("10.0.0.6", kStart + milliseconds(30));
  EXPECT_EQ(refused.kind, Admit::Kind::kRefuse);
  EXPECT_EQ(refused.reason, "max startups");
  Admit later = admission.on_connect("10.0.0.6", kStart + kStaleStartup);
  ASSERT_EQ(later.kind, Admit::Kind::kAdmitDropping);
  EXPECT_EQ(later.drop, 100);  // the oldest, past any honest handshake
}

TEST(NodeSshAdmission, LoggedInSessionsAreBoundedApartAndNeverDropped) {
  Admission admission(AdmissionLimits{2, 2, 2});
  admit_all(admission, "10.0.0.2", 1, 2, kStart);
  admission.on_login(1), admission.on_login(2);
  EXPECT_EQ(admission.logged_in(), 2);
  EXPECT_EQ(admission.starting(), 0);
  Admit refused = admission.on_connect("10.0.0.2", kStart);
  EXPECT_EQ(refused.reason, "max connections");
  EXPECT_NE(refused.refusal.find("2 are logged in, the most --sshd-max-connections allows"),
            std::string::npos);
  EXPECT_FALSE(admission.on_end(1, Ending::kLoggedIn, kStart).has_value());
  admit_all(admission, "10.0.0.66", 10, 2, kStart);  // strangers fill the starting slots
  Admit newcomer = admission.on_connect("10.0.0.67", kStart);
  ASSERT_EQ(newcomer.kind, Admit::Kind::kAdmitDropping);
  EXPECT_NE(newcomer.drop, 2);  // the logged-in session is never the one to go
}

TEST(NodeSshAdmission, PenaltiesAccumulateActivateAndRunDown) {
  Admission admission(AdmissionLimits{256, 64, 64});
  Clock::time_point now = kStart;
  // Banner grabbers: 1 s each. The 16th puts more than 15 s on the address: refused.
  for (pid_t id = 1; id <= 15; ++id) {
    admit_all(admission, "10.0.0.66", id, 1, now);
    EXPECT_FALSE(admission.on_end(id, Ending::kNoAuth, now).has_value()) << id;
  }
  EXPECT_EQ(admission.penalty_left("10.0.0.66", now), milliseconds(0));  // 15 s: not past the minimum
  admit_all(admission, "10.0.0.66", 16, 1, now);
  auto told = admission.on_end(16, Ending::kNoAuth, now);
  ASSERT_TRUE(told.has_value());
  EXPECT_NE(
      told->find("10.0.0.66: refused for 16 s: a penalty for connections closed without trying to log in"),
      std::string::npos)
      << *told;
  Admit refused = admission.on_connect("10.0.0.66", now + seconds(1));
  EXPECT_EQ(refused.kind, Admit::Kind::kRefuse);
  EXPECT_EQ(refused.reason, "penalty");
  EXPECT_NE(refused.refusal.find("refused for 15 s more"), std::string::npos) << refused.refusal;
  EXPECT_EQ(admission.on_connect("10.0.0.5", now).kind, Admit::Kind::kAdmit);  // only that address
  EXPECT_EQ(admission.on_connect("10.0.0.66", now + seconds(16)).kind, Admit::Kind::kAdmit);  // run down
}

TEST(NodeSshAdmission, EachEndingCostsAsOpenSshsDefaultsAndALoginNothing) {
  Admission admission(AdmissionLimits{256, 64, 64});
  admit_all(admission, "10.0.0.1", 1, 5, kStart);
  admission.on_login(1);
  EXPECT_FALSE(admission.on_end(1, Ending::kNoAuth, kStart).has_value());  // logged in first: free
  EXPECT_EQ(admission.penalty_left("10.0.0.1", kStart), milliseconds(0));
  admission.on_end(2, Ending::kAuthFailed, kStart);                        // 5 s
  admission.on_end(3, Ending::kAuthFailed, kStart);                        // 10 s
  EXPECT_EQ(admission.penalty_left("10.0.0.1", kStart), milliseconds(0));  // deferred, under 15 s
  admission.on_end(4, Ending::kGraceExceeded, kStart);                     // 30 s: active
  EXPECT_EQ(admission.penalty_left("10.0.0.1", kStart), seconds(30));
  admission.on_end(5, Ending::kCrashed, kStart);  // 120 s
  EXPECT_EQ(admission.penalty_left("10.0.0.1", kStart), seconds(120));
  for (pid_t id = 10; id < 20; ++id) {  // capped at 600 s
    admission.admitted(id, "10.0.0.1", kStart);
    admission.on_end(id, Ending::kCrashed, kStart);
  }
  EXPECT_EQ(admission.penalty_left("10.0.0.1", kStart), seconds(600));
}

TEST(NodeSshAdmission, ThePenaltyTableIsBounded) {
  Admission admission(AdmissionLimits{256, 64, 64});
  for (std::size_t i = 0; i <= kMaxPenalisedSources; ++i) {
    const std::string source = "fd00::" + std::to_string(i);
    const auto id = static_cast<pid_t>(i + 1);
    admission.admitted(id, source, kStart);
    admission.on_end(id, Ending::kCrashed, kStart + milliseconds(static_cast<long>(i)));
  }
  const Clock::time_point now = kStart + milliseconds(static_cast<long>(kMaxPenalisedSources));
  EXPECT_EQ(admission.penalty_left("fd00::0", now), milliseconds(0));  // the nearest its end went
  EXPECT_GT(admission.penalty_left("fd00::1", now), milliseconds(0));
}

TEST(NodeSshSessionRules, EveryMethodButTheJobKeyIsCountedAndNoneOnlyAfterTheFirst) {
  LoginGate gate(kStart, milliseconds(20000), 3);
  EXPECT_EQ(gate.on_none(), AuthVerdict::kMethodsListed);  // what every client asks first
  EXPECT_FALSE(gate.attempted());
  EXPECT_EQ(gate.on_none(), AuthVerdict::kDenied);  // the second counts
  EXPECT_TRUE(gate.attempted());
  EXPECT_EQ(gate.on_other_method(), AuthVerdict::kDenied);  // gssapi, password...
  EXPECT_EQ(gate.on_none(), AuthVerdict::kDeniedLast);
  EXPECT_EQ(gate.on_publickey(true, true), AuthVerdict::kDeniedLast);

  LoginGate job(kStart, milliseconds(20000), 3);
  EXPECT_EQ(job.on_none(), AuthVerdict::kMethodsListed);
  EXPECT_EQ(job.on_publickey(true, true), AuthVerdict::kAccepted);
}

}  // namespace
}  // namespace tmpi::nodessh

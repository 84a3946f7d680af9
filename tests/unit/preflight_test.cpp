// The preflight's checks and the lost-host question asked after a failure: the placement
// expected and read from the probe, the ssh check's workers under a process limit, names
// resolved to addresses, and a recreated pod told by its new address.
#include "launcher/preflight.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "initcontainer/ssh_identity.h"
#include "launcher/run_steps.h"

namespace tmpi::launch {
namespace {

TEST(Preflight, ExpectedPlacementFillsSlotsInOrder) {
  Topology t;
  t.hosts.resize(2);
  t.hosts[0].name = "a.j";
  t.hosts[0].slots = 2;
  t.hosts[1].name = "b.j";
  t.hosts[1].slots = 1;
  EXPECT_EQ(expected_placement(t, 5), (std::vector<std::string>{"a.j", "a.j", "b.j", "a.j", "a.j"}));
}

TEST(Preflight, PlacementCheckReadsBothTagFormats) {
  std::vector<std::string> expected = {"a.j", "a.j", "b.j"};
  EXPECT_TRUE(check_placement(expected, "[1,0]<stdout>:a\n[1,2]<stdout>:b\n[1,1]<stdout>:a\n").empty());
  EXPECT_TRUE(check_placement(expected, "[0] a\n[2] b\n[1] a\n").empty());
  auto everything_on_the_launcher =
      check_placement(expected, "[1,0]<stdout>:launcher\n[1,1]<stdout>:launcher\n");
  ASSERT_EQ(everything_on_the_launcher.size(), 3U);
  EXPECT_NE(everything_on_the_launcher[0].reason.find("rank 0 ran on launcher"), std::string::npos);
  EXPECT_NE(everything_on_the_launcher[2].reason.find("rank 2 did not report"), std::string::npos);
  std::string table = render_table(everything_on_the_launcher);
  EXPECT_EQ(table.rfind("HOST", 0), 0U);
  EXPECT_NE(table.find("placement"), std::string::npos);
  // The probe is done when every rank has said where it ran (a rank said twice counts once).
  EXPECT_EQ(ranks_reported("[1,0]<stdout>:a\n[1,0]<stdout>:a\n[1,2]<stdout>:b\nnoise\n"), 2);
  EXPECT_EQ(ranks_reported("[0] a\n[1] a\n[2] b\n"), 3);
  EXPECT_EQ(ranks_reported("[1,99999999999]<stdout>:a\n"), 0) << "a rank number past int is no rank";
}

// The ssh check's workers are joined on every path: when the process limit lets only some
// of them start, the others' share is done by those that did (before, the failed start of
// the third thread unwound past two joinable ones: std::terminate). The workers must still
// be busy when the third start fails, or the two would have ended and freed their places:
// so the hosts are a listener that takes connections and never speaks, and each probe, with
// a real job key, waits its 1 s for a banner.
TEST(Preflight, TheSshCheckSurvivesWorkersThatCannotStart) {
  ASSERT_EQ(getuid(), 0U) << "the unit tests run as root (as the README says): this one takes another uid";
  auto key = init::generate_ed25519();
  ASSERT_TRUE(key) << key.error().message;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(listener, 64), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  int port = ntohs(address.sin_port);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit three{3, 3};  // this process and two threads
    if (setgid(4343) != 0 || setuid(4343) != 0 || setrlimit(RLIMIT_NPROC, &three) != 0) _exit(10);
    std::vector<std::string> hosts(8, "127.0.0.1");
    auto rows = check_ssh(hosts, port, key->private_key, 8, Millis(1000));
    _exit(rows.size() == hosts.size() ? 0 : 11);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(listener);
  ASSERT_TRUE(WIFEXITED(status)) << "the check was killed: signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: could not take uid 4343; 11: a host had no row";
}

// A listener that never accepts: the kernel takes each connection, and no sshd ever speaks,
// so every handshake waits out its timeout. Its port, or -1.
int silent_port(int& listener) {
  listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listener, 128) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return -1;
  return ntohs(address.sin_port);
}

// After a failure in a partition, every host is silent: the search for the lost one takes no
// host up past its budget (without it, 40 silent hosts are 3 rounds of 16 handshakes of 2 s),
// and none at all once the launcher is told to stop.
TEST(Preflight, TheSearchForALostHostKeepsToItsBudgetAndStops) {
  auto key = init::generate_ed25519();
  ASSERT_TRUE(key) << key.error().message;
  int listener = -1;
  int port = silent_port(listener);
  ASSERT_GT(port, 0);
  std::vector<std::string> hosts(40, "127.0.0.1");
  HostAddresses at_launch = {{"127.0.0.1", {"127.0.0.1"}}};
  auto t0 = Clock::now();
  auto lost = find_lost_host(hosts, at_launch, port, key->private_key, Millis(500));
  auto took = std::chrono::duration_cast<Millis>(Clock::now() - t0);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->message.rfind("host 127.0.0.1 is gone (", 0), 0U) << lost->message;
  EXPECT_LT(took.count(), 4500) << "the first round (2 s) and no other";
  EXPECT_GE(took.count(), 1500) << "the first round's handshakes run to their 2 s";

  t0 = Clock::now();
  auto stopped =
      find_lost_host(hosts, at_launch, port, key->private_key, kLostHostBudget, [] { return true; });
  took = std::chrono::duration_cast<Millis>(Clock::now() - t0);
  EXPECT_EQ(stopped, std::nullopt) << "no host was taken up, so none is named";
  EXPECT_LT(took.count(), 500);
  close(listener);
}

// Names resolve to numeric addresses, sorted and without repeats (getaddrinfo gives one
// entry a protocol); a name that does not resolve is a "dns" row and has no entry.
TEST(Preflight, NamesResolveToTheirAddressesAndTheRestAreRows) {
  std::vector<CheckRow> failed;
  HostAddresses found = resolve_hosts({"127.0.0.1", "tmpi-no-such-host.invalid"}, failed);
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(found["127.0.0.1"], std::vector<std::string>{"127.0.0.1"});
  ASSERT_EQ(failed.size(), 1U);
  EXPECT_EQ(failed[0].host, "tmpi-no-such-host.invalid");
  EXPECT_EQ(failed[0].check, "dns");
}

// The agents are given an address the coordinator serves, never a loopback one (each
// agent's own pod), nor one of another family than it listens on; else the name.
TEST(Preflight, TheAgentsReachTheCoordinatorByAnAddressItServes) {
  const std::string name = "j-launcher-0-0.j";
  EXPECT_EQ(coordinator_address(name, {"10.0.0.5"}, "0.0.0.0", 29410), "10.0.0.5:29410");
  EXPECT_EQ(coordinator_address(name, {"10.0.0.5", "fd00::5"}, "0.0.0.0", 29410), "10.0.0.5:29410");
  EXPECT_EQ(coordinator_address(name, {"127.0.1.1", "192.168.7.2"}, "0.0.0.0", 1), "192.168.7.2:1")
      << "an image's /etc/hosts may map the host name to a loopback address";
  EXPECT_EQ(coordinator_address(name, {"127.0.1.1", "fd00::5"}, "0.0.0.0", 29410), name + ":29410")
      << "0.0.0.0 serves no IPv6";
  EXPECT_EQ(coordinator_address(name, {"fd00::5"}, "::", 29410), "[fd00::5]:29410");
  EXPECT_EQ(coordinator_address(name, {"::1", "fe80::1"}, "::", 29410), name + ":29410")
      << "loopback, and link-local (whose scope differs by pod)";
  EXPECT_EQ(coordinator_address(name, {"10.0.0.5"}, "10.9.9.9", 29410), "10.9.9.9:29410")
      << "a coordinator that listens on one address is reached there";
  EXPECT_EQ(coordinator_address(name, {}, "0.0.0.0", 29410), name + ":29410");
  EXPECT_EQ(coordinator_address(name, {"not an address"}, "not either", 29410), name + ":29410");
}

// A host is recreated when its name resolves to none of its old addresses: one kept address
// (a dual-stack pod that lost one) is the same pod; a name not resolved then or now is not
// this question's (the DNS check names it).
TEST(Preflight, ARecreatedHostIsToldByItsNewAddress) {
  HostAddresses at_launch = {{"a.j", {"10.0.0.2"}}, {"b.j", {"10.0.0.3", "fd00::3"}}, {"c.j", {}}};
  EXPECT_EQ(recreated_host(at_launch, at_launch), std::nullopt);
  EXPECT_EQ(recreated_host(at_launch, {{"a.j", {"10.0.0.2"}}, {"b.j", {"fd00::3"}}}), std::nullopt);
  EXPECT_EQ(recreated_host(at_launch, {{"c.j", {"10.0.0.9"}}}), std::nullopt);
  EXPECT_EQ(recreated_host(at_launch, {{"a.j", {}}}), std::nullopt);
  auto moved = recreated_host(at_launch, {{"a.j", {"10.0.0.2"}}, {"b.j", {"10.0.100.3"}}});
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->host, "b.j");
  EXPECT_EQ(moved->message.rfind("host b.j lost (recreated at 10.0.100.3 (was 10.0.0.3, fd00::3)", 0), 0U)
      << moved->message;
}

// After a failure, a name that no longer resolves is named first, and no ssh is tried (a
// handshake to each host costs up to 2 s); then a moved one, whose sshd would pass (port 1
// here refuses every handshake, so a fall through to ssh would name 127.0.0.1 instead).
TEST(Preflight, TheLostHostIsTheUnresolvedThenTheMovedThenTheSilent) {
  auto key = init::generate_ed25519();
  ASSERT_TRUE(key) << key.error().message;
  auto gone = find_lost_host({"127.0.0.1", "tmpi-no-such-host.invalid"}, {}, 1, key->private_key);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->host, "tmpi-no-such-host.invalid");
  EXPECT_EQ(gone->message.rfind("host tmpi-no-such-host.invalid is gone (does not resolve", 0), 0U)
      << gone->message;
  auto moved = find_lost_host({"127.0.0.1"}, {{"127.0.0.1", {"10.9.9.9"}}}, 1, key->private_key);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->message.rfind("host 127.0.0.1 lost (recreated at 127.0.0.1 (was 10.9.9.9)", 0), 0U)
      << moved->message;
  auto silent = find_lost_host({"127.0.0.1"}, {{"127.0.0.1", {"127.0.0.1"}}}, 1, key->private_key);
  ASSERT_TRUE(silent);
  EXPECT_EQ(silent->host, "127.0.0.1");
  EXPECT_EQ(silent->message.rfind("host 127.0.0.1 is gone (", 0), 0U) << silent->message;
}

// The table's cells are outside text (an ssh server's disconnect message, mpirun's output):
// no peer may write a record of its own, an escape or invalid UTF-8 into the launcher's output.
TEST(Preflight, TheTableShowsOutsideTextAsTheLogDoes) {
  std::string forged = "refused\n2026-12-03T00:00:00Z mpi-launcher info: job finished\x1b[2J\xff";
  std::string table = render_table({{"node-1", "ssh", forged}, {"node-2\n", "ssh", std::string(5000, 'x')}});
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find('\xff'), std::string::npos) << table;
  EXPECT_NE(table.find("\\x1b[2J\\xff"), std::string::npos) << table;
  EXPECT_EQ(table.find("\n2026-12-03"), std::string::npos) << "a line that looks like a record: " << table;
  EXPECT_NE(table.find("\n    | 2026-12-03"), std::string::npos) << table;
  EXPECT_LT(table.size(), 2500U) << "a reason is cut at 1 KiB";
}

// Where mpirun starts every daemon over the relay, the daemon's start is the proof that the
// account runs commands, and the check leaves its `exec true` out; anywhere else it keeps it.
TEST(Preflight, TheCheckLeavesItsCommandToTheDaemonsOnlyWhereMpirunStartsThemAllOverTheRelay) {
  auto relay = SshRelay::start({}, 2222);
  ASSERT_TRUE(relay) << relay.error().message;
  Job job;  // no hosts: each check below ends at once
  job.agents_ask = false;
  EXPECT_TRUE(SshCheckBeside(job, 2222, relay->get()).daemons_prove_commands());
  EXPECT_FALSE(SshCheckBeside(job, 2222, nullptr).daemons_prove_commands()) << "no relay: mpirun's own ssh";
  job.agents_ask = true;  // hydra, past 64 hosts, a routing tree of the user's
  EXPECT_FALSE(SshCheckBeside(job, 2222, relay->get()).daemons_prove_commands());
}

// A daemon that could not start is named as the check would have named its host: the
// status, the account, and what it printed on one line, cut, or that it printed nothing.
// One that ended only after mpirun had (Open MPI's orted exits 1 when it loses mpirun) is
// mpirun's failure, and no row.
TEST(Preflight, ADaemonThatCouldNotStartIsARowOfTheSshCheck) {
  auto mpirun_ended = Clock::now();
  auto before = mpirun_ended - Millis(5);
  std::vector<SshRelay::FailedStart> failed = {
      {"node-1.job", 1, "This account is currently\n  not available.\r\n", before},
      {"node-2.job", 127, "", before},
      {"node-3.job", 2, std::string(500, 'x'), before},
      {"node-4.job", 1, "lost its connection to mpirun", mpirun_ended + Millis(30)}};
  auto rows = daemon_start_rows(failed, "mpiuser", mpirun_ended);
  ASSERT_EQ(rows.size(), 3U) << "node-4's daemon ended after mpirun";
  EXPECT_EQ(rows[0].host, "node-1.job");
  EXPECT_EQ(rows[0].check, "ssh");
  EXPECT_NE(rows[0].reason.find("MPI's daemon exited 1 there as user mpiuser before any rank started: "
                                "\"This account is currently not available.\""),
            std::string::npos)
      << rows[0].reason;
  EXPECT_NE(rows[0].reason.find("nologin runs none"), std::string::npos)
      << "the likely fix: " << rows[0].reason;
  EXPECT_NE(rows[1].reason.find("exited 127 there as user mpiuser before any rank started, printing nothing"),
            std::string::npos)
      << rows[1].reason;
  EXPECT_NE(rows[2].reason.find(std::string(157, 'x') + "...\""), std::string::npos) << rows[2].reason;
  EXPECT_EQ(rows[2].reason.find(std::string(161, 'x')), std::string::npos) << "cut at 160 bytes";
  EXPECT_TRUE(daemon_start_rows({}, "mpiuser", mpirun_ended).empty());
}

}  // namespace
}  // namespace tmpi::launch

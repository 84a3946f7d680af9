// mpi-sshd's pure rules (nodessh/channel_rules.h, nodessh/session_rules.h): what a channel may
// ask, how a command's end is told, what happens when the client goes, and who may log in.
// No socket, no process: the time is a plain time point moved by hand.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>
#include <libssh/libssh.h>

#include "nodessh/channel_rules.h"
#include "nodessh/session_rules.h"

namespace tmpi::nodessh {
namespace {

using std::chrono::milliseconds;

ChannelRules make_rules() {
  return ChannelRules(ChannelLimits{{"LANG", "LC_*", "OMPI_?"}, milliseconds(2000)});
}

Request exec(std::string command) {
  return Request{RequestKind::kExec, "", std::move(command)};
}

TEST(NodeSshRules, PatternsAreSshdConfigGlobs) {
  EXPECT_TRUE(matches_pattern("LC_*", "LC_ALL"));
  EXPECT_TRUE(matches_pattern("LC_*", "LC_"));
  EXPECT_FALSE(matches_pattern("LC_*", "LANG"));
  EXPECT_TRUE(matches_pattern("OMPI_?", "OMPI_X"));
  EXPECT_FALSE(matches_pattern("OMPI_?", "OMPI_XY"));
  EXPECT_TRUE(matches_pattern("*", "ANY"));
  EXPECT_TRUE(matches_pattern("A*B*C", "AxxBxxBxC"));
  EXPECT_FALSE(matches_pattern("A*B*C", "AxxBxxBx"));
}

TEST(NodeSshRules, ExecRunsThroughShWithTheAcceptedEnvironment) {
  ChannelRules rules = make_rules();
  EXPECT_TRUE(rules.on_request({RequestKind::kEnv, "LANG", "C.UTF-8"}).accepted);
  EXPECT_TRUE(rules.on_request({RequestKind::kEnv, "LC_ALL", "C"}).accepted);
  EXPECT_TRUE(rules.on_request({RequestKind::kEnv, "LANG", "en_US.UTF-8"}).accepted);  // the last one counts
  Verdict refused = rules.on_request({RequestKind::kEnv, "LD_PRELOAD", "/tmp/x.so"});
  EXPECT_FALSE(refused.accepted);
  EXPECT_NE(refused.refusal.find("LD_PRELOAD"), std::string::npos) << refused.refusal;
  EXPECT_FALSE(rules.on_request({RequestKind::kEnv, "BAD=NAME", "x"}).accepted);
  ASSERT_TRUE(rules.on_request(exec("echo hi")).accepted);
  ASSERT_TRUE(rules.command().has_value());
  const Command& command = *rules.command();
  EXPECT_EQ(command.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(command.env, (Env{{"LC_ALL", "C"}, {"LANG", "en_US.UTF-8"}}));
  EXPECT_FALSE(command.pty);
}

TEST(NodeSshRules, OneCommandPerChannelAndNothingAddedAfterIt) {
  ChannelRules rules = make_rules();
  ASSERT_TRUE(rules.on_request({RequestKind::kShell, "", ""}).accepted);
  EXPECT_EQ(rules.command()->argv, (std::vector<std::string>{"/bin/sh", "-l"}));
  EXPECT_FALSE(rules.on_request(exec("true")).accepted);
  EXPECT_FALSE(rules.on_request({RequestKind::kEnv, "LANG", "C"}).accepted);
  EXPECT_FALSE(rules.on_request({RequestKind::kPty, "xterm", ""}).accepted);
}

TEST(NodeSshRules, PtySetsTermAndAllowsWindowChanges) {
  ChannelRules rules = make_rules();
  EXPECT_FALSE(rules.on_request({RequestKind::kWindowChange, "", ""}).accepted);
  EXPECT_TRUE(rules.on_request({RequestKind::kPty, "xterm-256color", ""}).accepted);
  EXPECT_FALSE(rules.on_request({RequestKind::kPty, "vt100", ""}).accepted);
  EXPECT_TRUE(rules.on_request({RequestKind::kWindowChange, "", ""}).accepted);
  ASSERT_TRUE(rules.on_request({RequestKind::kShell, "", ""}).accepted);
  EXPECT_TRUE(rules.command()->pty);
  EXPECT_EQ(rules.command()->env.back(), (std::pair<std::string, std::string>{"TERM", "xterm-256color"}));
  EXPECT_TRUE(rules.on_request({RequestKind::kWindowChange, "", ""}).accepted);
}

TEST(NodeSshRules, ForwardingAgentX11AndSubsystemsAreRefusedByName) {
  ChannelRules rules = make_rules();
  auto refusal = [&](const Request& request) {
    Verdict verdict = rules.on_request(request);
    EXPECT_FALSE(verdict.accepted);
    return verdict.refusal;
  };
  EXPECT_NE(refusal({RequestKind::kSubsystem, "sftp", ""}).find("subsystem \"sftp\" refused"),
            std::string::npos);
  EXPECT_NE(refusal({RequestKind::kX11, "", ""}).find("x11-req"), std::string::npos);
  EXPECT_NE(refusal({RequestKind::kAuthAgent, "", ""}).find("auth-agent-req"), std::string::npos);
  EXPECT_NE(refusal({RequestKind::kOther, "eow@openssh.com", ""}).find("eow@openssh.com"), std::string::npos);
  // A name off the wire is logged short and escaped: no line break reaches the log.
  std::string hostile = refusal({RequestKind::kSubsystem, "x\nforged line" + std::string(5000, 'a'), ""});
  EXPECT_EQ(hostile.find('\n'), std::string::npos);
  EXPECT_LT(hostile.size(), 200U);
  EXPECT_EQ(describe_refusal({SSH_REQUEST_CHANNEL_OPEN, SSH_CHANNEL_DIRECT_TCPIP, "db:5432"}),
            "port forwarding (direct-tcpip to db:5432) refused");
  EXPECT_NE(describe_refusal({SSH_REQUEST_GLOBAL, SSH_GLOBAL_REQUEST_TCPIP_FORWARD, "0.0.0.0:80"})
                .find("tcpip-forward"),
            std::string::npos);
}

TEST(NodeSshRules, SftpRunsTheImagesSftpServerAsTheChannelsCommand) {
  ChannelRules rules = make_rules();
  ASSERT_TRUE(rules.on_request({RequestKind::kEnv, "LANG", "C.UTF-8"}).accepted);
  ASSERT_TRUE(
      rules.on_request({RequestKind::kSubsystem, "sftp", "/usr/libexec/openssh/sftp-server"}).accepted);
  ASSERT_TRUE(rules.command().has_value());
  EXPECT_EQ(rules.command()->argv, std::vector<std::string>{"/usr/libexec/openssh/sftp-server"});
  EXPECT_EQ(rules.command()->env, (std::vector<std::pair<std::string, std::string>>{{"LANG", "C.UTF-8"}}));
  EXPECT_FALSE(rules.command()->pty);
  // The channel's one command: nothing starts after it.
  EXPECT_FALSE(rules.on_request(exec("id")).accepted);
  EXPECT_FALSE(rules.on_request({RequestKind::kSubsystem, "sftp", "/usr/lib/openssh/sftp-server"}).accepted);
}

TEST(NodeSshRules, SftpWithoutAnSftpServerIsRefusedWithWhatWorks) {
  ChannelRules rules = make_rules();
  Verdict none = rules.on_request({RequestKind::kSubsystem, "sftp", ""});
  EXPECT_FALSE(none.accepted);
  EXPECT_NE(none.refusal.find("subsystem \"sftp\" refused: no sftp-server in this image"), std::string::npos);
  EXPECT_NE(none.refusal.find("/usr/lib/openssh/sftp-server, /usr/libexec/openssh/sftp-server"),
            std::string::npos);
  // The person reads why, and what does work.
  EXPECT_NE(none.to_client.find("no sftp-server in this image"), std::string::npos);
  EXPECT_NE(none.to_client.find("scp -O"), std::string::npos);
  EXPECT_FALSE(rules.command().has_value());
  // Only a program of the list runs, whatever the server were to pass.
  EXPECT_FALSE(rules.on_request({RequestKind::kSubsystem, "sftp", "/tmp/sftp-server"}).accepted);
  EXPECT_FALSE(rules.command().has_value());
  // Another subsystem is refused by its name, even where sftp-server is there.
  Verdict other = rules.on_request({RequestKind::kSubsystem, "netconf", "/usr/lib/openssh/sftp-server"});
  EXPECT_FALSE(other.accepted);
  EXPECT_NE(other.refusal.find("subsystem \"netconf\" refused: mpi-sshd serves only sftp"),
            std::string::npos);
  EXPECT_TRUE(other.to_client.empty());
  EXPECT_FALSE(rules.command().has_value());
  // The channel is still free for its one command.
  EXPECT_TRUE(rules.on_request(exec("true")).accepted);
}

TEST(NodeSshRules, AClientBeyondItsWindowIsToldApart) {
  // libssh 0.10 opens a window of 1.28 MB at most, topped up below half of it: a client
  // within its window has less than 2 MB held.
  EXPECT_FALSE(window_ignored(0).has_value());
  EXPECT_FALSE(window_ignored(2 * 1280000).has_value());
  EXPECT_FALSE(window_ignored(kMaxClientBytesHeld).has_value());
  auto ignored = window_ignored(kMaxClientBytesHeld + 1);
  ASSERT_TRUE(ignored.has_value());
  EXPECT_NE(ignored->find("ignored the channel's window"), std::string::npos);
}

TEST(NodeSshRules, SignalsReachOnlyARunningCommand) {
  ChannelRules rules = make_rules();
  EXPECT_FALSE(rules.on_request({RequestKind::kSignal, "TERM", ""}).accepted);
  ASSERT_TRUE(rules.on_request(exec("sleep 9")).accepted);
  EXPECT_FALSE(rules.on_request({RequestKind::kSignal, "BOGUS", ""}).accepted);
  Request term{RequestKind::kSignal, "TERM", ""};
  ASSERT_TRUE(rules.on_request(term).accepted);
  EXPECT_EQ(rules.signal_action(term), (Action{ActionKind::kSignalGroup, SIGTERM, ""}));
}

TEST(NodeSshRules, TheExitIsToldOnceTheOutputHasEndedToo) {
  ChannelRules rules = make_rules();
  ASSERT_TRUE(rules.on_request(exec("exit 3")).accepted);
  EXPECT_TRUE(rules.on_exit(W_EXITCODE(3, 0)).empty());  // output may still come
  std::vector<Action> told = rules.on_output_ended();
  EXPECT_EQ(told, (std::vector<Action>{{ActionKind::kSendExitStatus, 3, ""},
                                       {ActionKind::kSendEofAndClose, 0, ""}}));
  EXPECT_TRUE(rules.finished());
  EXPECT_TRUE(rules.on_client_gone(Clock::time_point{}).empty());  // closed by us: no hangup
}

TEST(NodeSshRules, ASignalledCommandIsToldAsExitSignal) {
  ChannelRules killed = make_rules();
  ASSERT_TRUE(killed.on_request(exec("kill -9 $$")).accepted);
  EXPECT_TRUE(killed.on_output_ended().empty());  // its process has not been reaped yet
  EXPECT_EQ(killed.on_exit(SIGKILL), (std::vector<Action>{{ActionKind::kSendExitSignal, 0, "KILL"},
                                                          {ActionKind::kSendEofAndClose, 0, ""}}));
  ChannelRules odd = make_rules();
  ASSERT_TRUE(odd.on_request(exec("x")).accepted);
  odd.on_output_ended();
  EXPECT_EQ(odd.on_exit(SIGRTMIN + 2).front(),
            (Action{ActionKind::kSendExitStatus, 128 + SIGRTMIN + 2, ""}));  // no RFC 4254 name
}

TEST(NodeSshRules, AGoneClientHangsUpTheGroupThenKillsIt) {
  ChannelRules rules = make_rules();
  ASSERT_TRUE(rules.on_request(exec("orted")).accepted);
  const Clock::time_point start{};
  EXPECT_EQ(rules.on_client_gone(start), (std::vector<Action>{{ActionKind::kHangupGroup, 0, ""}}));
  EXPECT_TRUE(rules.on_client_gone(start).empty());  // once
  EXPECT_FALSE(rules.finished());
  EXPECT_TRUE(rules.on_tick(start + milliseconds(1999), true).empty());
  EXPECT_EQ(rules.on_tick(start + milliseconds(2000), true),
            (std::vector<Action>{{ActionKind::kKillGroup, 0, ""}}));
  EXPECT_TRUE(rules.finished());
  EXPECT_TRUE(rules.on_exit(SIGKILL).empty());  // nobody to tell
}

TEST(NodeSshRules, AGroupThatEndsOnTheHangupIsNotKilled) {
  ChannelRules rules = make_rules();
  ASSERT_TRUE(rules.on_request(exec("orted")).accepted);
  rules.on_client_gone(Clock::time_point{});
  EXPECT_TRUE(rules.on_tick(Clock::time_point{} + milliseconds(100), false).empty());
  EXPECT_TRUE(rules.finished());
  EXPECT_TRUE(rules.on_tick(Clock::time_point{} + milliseconds(5000), true).empty());
}

TEST(NodeSshRules, AClientGoneBeforeAnyCommandLeavesNothingToEnd) {
  ChannelRules rules = make_rules();
  EXPECT_TRUE(rules.on_client_gone(Clock::time_point{}).empty());
  EXPECT_TRUE(rules.finished());
}

TEST(NodeSshSessionRules, OnlyTheJobKeyLogsInWithinItsTriesAndTime) {
  const Clock::time_point start{};
  LoginGate gate(start, milliseconds(20000), 3);
  EXPECT_EQ(gate.on_publickey(true, false), AuthVerdict::kProbeAccepted);
  EXPECT_FALSE(gate.authenticated());
  EXPECT_EQ(gate.on_publickey(false, true), AuthVerdict::kDenied);
  EXPECT_EQ(gate.on_other_method(), AuthVerdict::kDenied);
  EXPECT_EQ(gate.on_publickey(false, false), AuthVerdict::kDeniedLast);
  EXPECT_EQ(gate.on_publickey(true, true), AuthVerdict::kDeniedLast);  // no try left, even for the right key
  EXPECT_FALSE(gate.expired(start + milliseconds(19999)));
  EXPECT_TRUE(gate.expired(start + milliseconds(20000)));

  LoginGate good(start, milliseconds(20000), 3);
  EXPECT_EQ(good.on_publickey(true, true), AuthVerdict::kAccepted);
  EXPECT_FALSE(good.expired(start + milliseconds(60000)));
}

TEST(NodeSshSessionRules, BoundsAndOptions) {
  EXPECT_TRUE(check_accept_env({"LANG", "LC_*", "OMPI_?"}));
  auto bad = check_accept_env({"LANG", "LC ALL"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit, Exit::kUsage);
  EXPECT_NE(bad.error().message.find("--sshd-accept-env: 'LC ALL'"), std::string::npos)
      << bad.error().message;
}

sockaddr_storage socket_address(int family, const char* text, std::uint16_t port) {
  sockaddr_storage storage{};
  if (family == AF_INET) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    inet_pton(AF_INET, text, &v4.sin_addr);
    std::memcpy(&storage, &v4, sizeof v4);
  } else {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    inet_pton(AF_INET6, text, &v6.sin6_addr);
    std::memcpy(&storage, &v6, sizeof v6);
  }
  return storage;
}

TEST(NodeSshSessionRules, ConnectionVariablesNameBothEndsAsSshdDoes) {
  EXPECT_EQ(endpoint_of(socket_address(AF_INET, "10.0.0.5", 51234)), (Endpoint{"10.0.0.5", 51234}));
  // A "::" listener sees an IPv4 client as mapped: told as plain IPv4, as sshd tells it.
  EXPECT_EQ(endpoint_of(socket_address(AF_INET6, "::ffff:10.0.0.7", 2222)), (Endpoint{"10.0.0.7", 2222}));
  EXPECT_EQ(endpoint_of(socket_address(AF_INET6, "fd00::1", 2222)), (Endpoint{"fd00::1", 2222}));
  auto env = connection_env(Endpoint{"10.0.0.5", 51234}, Endpoint{"10.0.0.7", 2222});
  using Variable = std::pair<std::string, std::string>;
  EXPECT_EQ(env, (std::vector<Variable>{{"SSH_CLIENT", "10.0.0.5 51234 2222"},
                                        {"SSH_CONNECTION", "10.0.0.5 51234 10.0.0.7 2222"}}));
}

}  // namespace
}  // namespace tmpi::nodessh

// The ssh relay's edges, without an sshd: how mpi-ssh reads MPI's ssh command lines, the
// request's format, and what the relay answers the real mpi-ssh binary when it cannot run a
// command (a host it does not hold, a host the check refused, another port, a malformed
// request, a relay that stops while a request waits). The relayed command itself, over a
// real sshd, is the cluster tests' (cluster.launcher.ssh-relay, and every default launch).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "agent/contract.h"
#include "ssh/call.h"
#include "ssh/client.h"
#include "ssh/relay.h"

namespace tmpi::launch {
namespace {

using Args = std::vector<std::string>;

TEST(SshCall, ReadsOpenMpisCommandLine) {
  // plm_rsh_args split on spaces, the node, then the daemon's words (plm_rsh_module.c).
  SshCall call = parse_ssh_call({"-F", "/dev/null", "-p", "2222", "-i", "/k/id", "-o", "IdentitiesOnly=yes",
                                 "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR", "node-0.job",
                                 "orted", "-mca", "ess", "\"env\""});
  EXPECT_EQ(call.not_relayable, "");
  EXPECT_EQ(call.host, "node-0.job");
  EXPECT_EQ(call.port, 2222);
  EXPECT_EQ(call.user, "");
  EXPECT_EQ(call.command, "orted -mca ess \"env\"");
}

TEST(SshCall, ReadsHydrasAndSshsOtherForms) {
  SshCall hydra =
      parse_ssh_call({"-p2222", "-x", "root@node-1", "/usr/bin/hydra_pmi_proxy", "--control-port", "x:1"});
  EXPECT_EQ(hydra.not_relayable, "");
  EXPECT_EQ(hydra.user, "root");
  EXPECT_EQ(hydra.host, "node-1");
  EXPECT_EQ(hydra.port, 2222);
  EXPECT_EQ(hydra.command, "/usr/bin/hydra_pmi_proxy --control-port x:1");
  SshCall after =
      parse_ssh_call({"node-1", "-l", "mpiuser", "-oPort=2200", "-nqT", "true"});  // ssh reads these too
  EXPECT_EQ(after.not_relayable, "");
  EXPECT_EQ(after.user, "mpiuser");
  EXPECT_EQ(after.port, 2200);
  EXPECT_TRUE(after.no_stdin);
  EXPECT_EQ(after.command, "true");
  EXPECT_EQ(parse_ssh_call({"--", "node-1", "-v"}).command, "-v");
}

TEST(SshCall, LeavesToSshWhatTheRelayCannotHonour) {
  for (const Args& args :
       {Args{"-L", "8080:x:80", "node", "true"}, Args{"-t", "node", "true"}, Args{"-v", "node", "true"},
        Args{"-o", "ProxyCommand=nc x", "node", "true"}, Args{"-oControlPath=/s", "node", "true"},
        Args{"-p", "0", "node", "true"}, Args{"-p", "22x", "node", "true"}, Args{"node"}, Args{"-p"},
        Args{"node;rm", "true"}, Args{"ssh://node:22", "true"}, Args{"-Z", "node", "true"}, Args{}}) {
    EXPECT_NE(relay_refusal(parse_ssh_call(args)), "") << ::testing::PrintToString(args);
  }
}

TEST(SshCall, LeavesALoginAndATerminalToAClientOfItsOwn) {
  // mpi-ssh-client serves them (ssh/terminal.h); the relay's daemons never have a terminal.
  SshCall login = parse_ssh_call({"-p", "2222", "node-1"});
  EXPECT_EQ(login.not_relayable, "");
  EXPECT_EQ(relay_refusal(login), "no command (a login shell)");
  SshCall forced = parse_ssh_call({"-tt", "-q", "node-1", "top"});
  EXPECT_EQ(forced.not_relayable, "");
  EXPECT_EQ(forced.tty_requests, 2);
  EXPECT_TRUE(forced.quiet);
  EXPECT_EQ(relay_refusal(forced), "-t (a terminal)");
  EXPECT_TRUE(parse_ssh_call({"-o", "LogLevel=ERROR", "node-1"}).quiet);  // the launcher's own options
  EXPECT_FALSE(parse_ssh_call({"-o", "LogLevel=INFO", "node-1"}).quiet);
  SshCall plain = parse_ssh_call({"-T", "node-1", "true"});
  EXPECT_TRUE(plain.no_tty);
  EXPECT_EQ(relay_refusal(plain), "");
}

// mpi-ssh-client runs a call itself where OpenSSH's client cannot (no passwd entry): it
// takes the launcher's own options, and refuses by name what it would not honour as ssh does.
TEST(SshCall, AClientOfItsOwnTakesTheLaunchersOptionsAndRefusesTheRest) {
  Args launchers = {"-F",         "/dev/null",
                    "-p",         "2222",
                    "-i",         "/h/.ssh/id_ed25519",
                    "-o",         "IdentitiesOnly=yes",
                    "-o",         "UserKnownHostsFile=/h/.ssh/known_hosts",
                    "-o",         "StrictHostKeyChecking=yes",
                    "-o",         "BatchMode=yes",
                    "node-0.job", "orted",
                    "-mca",       "x"};
  SshCall call = parse_ssh_call(launchers);
  EXPECT_EQ(call.identity_file, "/h/.ssh/id_ed25519");
  EXPECT_EQ(call.known_hosts_file, "/h/.ssh/known_hosts");
  EXPECT_EQ(call.strict_host_keys, true);
  EXPECT_EQ(call.config_file, "/dev/null");
  EXPECT_EQ(client_cannot_serve(call), std::nullopt);
  auto refused = [&](Args args) {
    auto why = client_cannot_serve(parse_ssh_call(args));
    return why.value_or("(served)");
  };
  Args lenient = launchers;
  lenient[11] = "StrictHostKeyChecking=accept-new";  // a first key taken on trust: never here
  EXPECT_NE(refused(lenient).find("StrictHostKeyChecking=yes"), std::string::npos) << refused(lenient);
  // As ssh, the first value of an option holds: a later one (a user's plm_rsh_args) changes nothing.
  Args later = launchers;
  later.insert(later.end() - 4,
               {"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/tmp/any", "-i", "/tmp/k"});
  SshCall first = parse_ssh_call(later);
  EXPECT_EQ(first.strict_host_keys, true);
  EXPECT_EQ(first.known_hosts_file, "/h/.ssh/known_hosts");
  EXPECT_EQ(first.identity_file, "/h/.ssh/id_ed25519");
  Args no_key = {"-o", "UserKnownHostsFile=/k", "-o", "StrictHostKeyChecking=yes", "node", "true"};
  EXPECT_EQ(refused(no_key), "no identity file (-i)");
  Args own_config = launchers;
  own_config[1] = "/h/.ssh/config";
  EXPECT_EQ(refused(own_config), "a config file (-F) other than /dev/null");
  Args tunnel = launchers;
  tunnel.insert(tunnel.begin(), {"-L", "8080:x:80"});
  EXPECT_EQ(refused(tunnel), "-L 8080:x:80");
  Args by_option = {"-oIdentityFile=/k/id",
                    "-o",
                    "UserKnownHostsFile /k/known",
                    "-o",
                    "stricthostkeychecking=YES",
                    "node",
                    "true"};
  EXPECT_EQ(refused(by_option), "(served)");
}

TEST(SshCall, RequestRoundTripsAndRejectsMalformedBodies) {
  SshCall call = parse_ssh_call({"-p", "2222", "u@node-0.job", "echo", "a  b"});
  auto back = decode_relay_request(encode_relay_request(call));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->host, "node-0.job");
  EXPECT_EQ(back->user, "u");
  EXPECT_EQ(back->port, 2222);
  EXPECT_EQ(back->command, "echo a  b");
  using namespace std::string_literals;
  for (const std::string& body : {"node\0u\0\0"s, "node\0u\0"s, "node\0u\0 99999\0cmd"s, "node\0u\0\0cmd\0x"s,
                                  "no de\0u\0\0cmd"s, "node\0u\nx\0\0cmd"s, ""s}) {
    EXPECT_FALSE(decode_relay_request(body).has_value()) << ::testing::PrintToString(body);
  }
}

// mpi-ssh as MPI runs it, with the relay named and an `ssh` on PATH that says it ran.
struct Ran {
  int status = -1;
  std::string out, err;
};

// A request with a length past the bound and no descriptors, sent to the relay at
// `socket_path`; its answer ("" when none came).
std::string junk_request(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  std::string junk = "tmpi-ssh-relay 1\n\xff\xff\xff\xff";
  char answer[128] = {};
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      write(fd, junk.data(), junk.size()) != static_cast<ssize_t>(junk.size()) ||
      read(fd, answer, sizeof answer - 1) <= 0)
    answer[0] = '\0';
  close(fd);
  return answer;
}

// This process's virtual size, in KiB (/proc/self/status).
long virtual_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  }
  return -1;
}

class RelayAnswers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tmpi-relay-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream stub(dir_ / "ssh");
    stub << "#!/bin/sh\necho \"plain ssh: $*\"\n";
    stub.close();
    std::filesystem::permissions(dir_ / "ssh", std::filesystem::perms::owner_all);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Ran mpi_ssh(const SshRelay& relay, const Args& args) { return mpi_ssh(relay.socket_path(), args); }
  Ran mpi_ssh(const std::string& socket, const Args& args) {
    std::string out = dir_ / "out", err = dir_ / "err";
    std::vector<std::string> words = {TMPI_MPI_SSH};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    std::string path_variable = "PATH=" + dir_.string() + ":/usr/bin:/bin";
    std::string relay_variable = std::string(contract::kSshRelay) + "=" + socket;
    std::vector<char*> envp = {path_variable.data(), relay_variable.data(), nullptr};
    // Opened before the fork: the relay's threads run, and a forked child only execs.
    int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(err_fd, STDERR_FILENO);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(out_fd);
    close(err_fd);
    Ran ran;
    int status = 0;
    waitpid(pid, &status, 0);
    ran.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream out_file(out), err_file(err);
    std::getline(out_file, ran.out, '\0');
    std::getline(err_file, ran.err, '\0');
    return ran;
  }

  std::filesystem::path dir_;
};

TEST_F(RelayAnswers, AHostItDoesNotHoldOrAnotherPortGoesToTheRealSsh) {
  auto relay = SshRelay::start({"node-0.job"}, 2222);
  ASSERT_TRUE(relay) << relay.error().message;
  Ran other_host = mpi_ssh(**relay, {"-p", "2222", "elsewhere", "true"});
  EXPECT_EQ(other_host.status, 0);
  EXPECT_EQ(other_host.out, "plain ssh: -p 2222 elsewhere true\n");
  Ran other_port = mpi_ssh(**relay, {"-p", "2200", "node-0.job", "true"});
  EXPECT_EQ(other_port.out, "plain ssh: -p 2200 node-0.job true\n");
  Ran forwarding = mpi_ssh(**relay, {"-L", "1:x:2", "node-0.job", "true"});  // never asks the relay
  EXPECT_EQ(forwarding.out, "plain ssh: -L 1:x:2 node-0.job true\n");
  EXPECT_EQ((*relay)->counts().fell_back, 2);
}

TEST_F(RelayAnswers, AHostTheCheckRefusedFailsWithTheChecksReason) {
  auto relay = SshRelay::start({"node-0.job", "node-1.job"}, 2222);
  ASSERT_TRUE(relay) << relay.error().message;
  // mpirun asks before the check has its verdict: the request waits for it.
  std::thread verdict([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    (*relay)->refuse("node-1.job", "sshd refused the job key\x1b[31m for user root\n");
  });
  auto t0 = std::chrono::steady_clock::now();
  Ran ran = mpi_ssh(**relay, {"-p", "2222", "node-1", "orted"});  // the short name, as Open MPI may give it
  verdict.join();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  EXPECT_EQ(ran.status, 255);
  EXPECT_EQ(ran.out, "");
  EXPECT_EQ(
      ran.err,
      "mpi-ssh: node-1: the preflight's ssh check failed: sshd refused the job key [31m for user root \n");
  EXPECT_EQ((*relay)->counts().failed, 1);
}

// A relay that stops tells a request still waiting for its verdict: a waiter left to its
// verdict timeout (a minute) would hold the launcher's end; the 3 s bound catches that. The
// stop's own length is judged by the median of three, as in ItsEndIsPrompt: one stop that
// lost its core beside other tests says nothing (a single stop took 119 ms so under asan).
TEST_F(RelayAnswers, AMalformedRequestIsRefusedAndAStoppingRelayLetsWaitersGo) {
  std::vector<std::chrono::steady_clock::duration> resets;
  for (int round = 0; round < 3; ++round) {
    auto relay = SshRelay::start({"node-0.job"}, 2222);
    ASSERT_TRUE(relay) << relay.error().message;
    EXPECT_EQ(junk_request((*relay)->socket_path()),
              "fail the request to the launcher's ssh relay was malformed\n");
    // node-0 has no verdict yet: the request waits, until the relay goes.
    std::string socket_path = (*relay)->socket_path();
    std::chrono::steady_clock::duration reset_took{};
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      auto r0 = std::chrono::steady_clock::now();
      relay->reset();
      reset_took = std::chrono::steady_clock::now() - r0;
    });
    auto t0 = std::chrono::steady_clock::now();
    Ran ran = mpi_ssh(socket_path, {"node-0.job", "true"});
    stopper.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    resets.push_back(reset_took);
    EXPECT_EQ(ran.status, 255);
    EXPECT_NE(ran.err.find("mpi-ssh: node-0.job: "), std::string::npos) << ran.err;
    EXPECT_FALSE(std::filesystem::exists(socket_path)) << "the relay's folder outlived it";
  }
  std::ranges::sort(resets);
  EXPECT_LT(resets[1], std::chrono::milliseconds(60)) << "a waiter is told at once";
}

// A thread that has answered its request is joined when the next request comes, not kept to
// the end: a terminated thread holds its stack (8 MiB of address space) until it is joined,
// and a long job's relay would gather one a request.
TEST_F(RelayAnswers, AnsweredCallersAreJoinedAsNewOnesCome) {
  auto relay = SshRelay::start({"node-0.job"}, 2222);
  ASSERT_TRUE(relay) << relay.error().message;
  ASSERT_NE(junk_request((*relay)->socket_path()), "");
  long before = virtual_kib();
  for (int i = 0; i < 200; ++i) ASSERT_NE(junk_request((*relay)->socket_path()), "") << "request " << i;
  long grown_mib = (virtual_kib() - before) / 1024;
  EXPECT_LT(grown_mib, 200) << "200 answered requests grew the address space by " << grown_mib << " MiB";
  EXPECT_EQ((*relay)->counts().failed, 201);
}

// Its end is at once, not a poll slice (100 ms) later: the launcher's exit waits for it
// (about 50 ms of every launch). Five relays, each idle in its accept loop; an end that
// waited out the slice takes about 80 ms every time, so the median is judged (one end that
// lost its core to another test for 60 ms says nothing about the relay).
TEST_F(RelayAnswers, ItsEndIsPrompt) {
  std::vector<std::chrono::steady_clock::duration> ends;
  for (int i = 0; i < 5; ++i) {
    auto relay = SshRelay::start({"node-0.job"}, 2222);
    ASSERT_TRUE(relay) << relay.error().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the acceptor is in its poll
    auto r0 = std::chrono::steady_clock::now();
    relay->reset();
    ends.push_back(std::chrono::steady_clock::now() - r0);
  }
  std::ranges::sort(ends);
  EXPECT_LT(ends[ends.size() / 2], std::chrono::milliseconds(40));
}

}  // namespace
}  // namespace tmpi::launch

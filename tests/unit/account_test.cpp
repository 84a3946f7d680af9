// The running uid's account for a non-root sshd (initcontainer/account.h): nss_wrapper's
// passwd and group as mpi-init renders them, the checks before any write, the StrictModes
// walk as sshd does it, and the sshd_config lines that follow from them.
#include "initcontainer/account.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/files.h"
#include "common/job_key.h"
#include "initcontainer/ssh_identity.h"

namespace tmpi::init {
namespace {

constexpr std::string_view kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# a comment\n"
    "mpiuser:x:1000:1000::/home/mpiuser:/bin/bash\n";
constexpr std::string_view kGroup = "root:x:0:\nmpiuser:x:1000:\n";

std::string temp_dir() {
  std::string dir = std::filesystem::temp_directory_path() / "tmpi-account-XXXXXX";
  return mkdtemp(dir.data());
}

TEST(Account, AnArbitraryUidGetsAnEntryWithHomeAndShell) {
  std::vector<std::string> notes;
  std::string passwd = render_nss_passwd(kPasswd, 1000870000, 0, "/home/mpiuser", &notes);
  EXPECT_EQ(passwd,
            std::string(kPasswd) + "user1000870000:x:1000870000:0:trainer-mpi:/home/mpiuser:/bin/sh\n");
  ASSERT_EQ(notes.size(), 1U);
  EXPECT_NE(notes[0].find("no passwd entry"), std::string::npos);
  // gid 0 is the image's root group: nothing to add.
  EXPECT_EQ(render_nss_group(kGroup, 0), kGroup);
  EXPECT_EQ(render_nss_group(kGroup, 1000870000), std::string(kGroup) + "group1000870000:x:1000870000:\n");
}

TEST(Account, AnImageUidKeepsItsEntryWithTheHomeOfThePod) {
  std::string passwd = render_nss_passwd(kPasswd, 1000, 1000, "/home/pod");
  EXPECT_NE(passwd.find("mpiuser:x:1000:1000::/home/pod:/bin/bash\n"), std::string::npos) << passwd;
  EXPECT_EQ(passwd.find("/home/mpiuser"), std::string::npos);
  EXPECT_NE(passwd.find("# a comment\n"), std::string::npos);
  EXPECT_EQ(render_nss_passwd(kPasswd, 0, 0, "/root"), kPasswd);
}

// nobody (65534), as Debian's and most images' passwd has it: ssh could run no command as it.
TEST(Account, AShellThatRunsNoCommandBecomesBinSh) {
  const std::string etc =
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
      "daemon:x:1:1:daemon:/usr/sbin:/bin/false\n"
      "blank:x:2:2::/home/blank:\n";
  std::vector<std::string> notes;
  std::string passwd = render_nss_passwd(etc, 65534, 65534, "/home/mpiuser", &notes);
  EXPECT_NE(passwd.find("nobody:x:65534:65534:nobody:/home/mpiuser:/bin/sh\n"), std::string::npos) << passwd;
  EXPECT_NE(notes.back().find("shell /usr/sbin/nologin -> /bin/sh"), std::string::npos);
  EXPECT_NE(render_nss_passwd(etc, 1, 1, "/d").find("daemon:x:1:1:daemon:/d:/bin/sh\n"), std::string::npos);
  // An empty shell is /bin/sh to sshd already: kept as it is.
  EXPECT_NE(render_nss_passwd(etc, 2, 2, "/b").find("blank:x:2:2::/b:\n"), std::string::npos);
}

TEST(Account, PrepareChecksTheEnvironmentBeforeAnyWrite) {
  std::string etc = temp_dir();
  ASSERT_TRUE(write_atomic(etc + "/passwd", kPasswd));
  ASSERT_TRUE(write_atomic(etc + "/group", kGroup));
  // Neither an entry nor nss_wrapper: ssh would say "No user exists for uid".
  auto none = prepare_account({{"HOME", "/h"}}, 1000870000, 0, SshServer::kOpenSsh, etc);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().exit, Exit::kUsage);
  EXPECT_NE(none.error().message.find("NSS_WRAPPER_PASSWD"), std::string::npos);
  auto half =
      prepare_account({{"HOME", "/h"}, {"NSS_WRAPPER_PASSWD", "/h/p"}}, 1000, 1000, SshServer::kOpenSsh, etc);
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().message.find("NSS_WRAPPER_GROUP"), std::string::npos);
  auto no_home = prepare_account({{"NSS_WRAPPER_PASSWD", "/h/p"}, {"NSS_WRAPPER_GROUP", "/h/g"}}, 1000, 1000,
                                 SshServer::kOpenSsh, etc);
  ASSERT_FALSE(no_home);
  EXPECT_NE(no_home.error().message.find("HOME is unset"), std::string::npos);
  for (const char* bad : {"/h:/x", "/h\n/x"}) {  // the passwd entry's fields, and its lines
    auto odd = prepare_account({{"HOME", bad}, {"NSS_WRAPPER_PASSWD", "/h/p"}, {"NSS_WRAPPER_GROUP", "/h/g"}},
                               1000870000, 0, SshServer::kOpenSsh, etc);
    ASSERT_FALSE(odd) << bad;
    EXPECT_EQ(odd.error().exit, Exit::kUsage);
    EXPECT_NE(odd.error().message.find("a passwd entry cannot hold ':' or control characters"),
              std::string::npos);
  }
  // The ssh folder is a bare word in ssh's and sshd's configs.
  for (const char* bad : {"/home/my user/.ssh", "/h/%d", "/h/\"x", "/h/#"}) {
    auto odd = check_ssh_dir(SshLayout{bad, 2222, "/h", {}, std::nullopt}, KeyPair{"", "", "id_ed25519"});
    ASSERT_FALSE(odd) << bad;
    EXPECT_EQ(odd.error().exit, Exit::kUsage) << bad;
    EXPECT_NE(odd.error().message.find("choose a plain path"), std::string::npos) << odd.error().message;
  }

  auto listed = prepare_account({{"HOME", "/elsewhere"}}, 1000, 1000, SshServer::kOpenSsh, etc);
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(listed->home, "/home/mpiuser") << "without nss_wrapper sshd sees the entry's home";
  EXPECT_FALSE(listed->nss);

  std::string home = etc + "/home";
  auto account = prepare_account({{"HOME", home},
                                  {"LD_PRELOAD", "libnss_wrapper.so"},
                                  {"NSS_WRAPPER_PASSWD", home + "/.nss_wrapper/passwd"},
                                  {"NSS_WRAPPER_GROUP", home + "/.nss_wrapper/group"},
                                  {"NSS_WRAPPER_DISABLE_DEEPBIND", "1"},
                                  {"NSS_WRAPPER_OTHER", "x"}},
                                 1000870000, 0, SshServer::kOpenSsh, etc);
  ASSERT_TRUE(account) << account.error().message;
  EXPECT_EQ(account->home, home);
  EXPECT_TRUE(account->warnings.empty());
  EXPECT_EQ(account->session_env.at("LD_PRELOAD"), "libnss_wrapper.so");
  // nss_wrapper's switch for sanitized builds reaches the sessions; nothing unknown does.
  EXPECT_EQ(account->session_env.at("NSS_WRAPPER_DISABLE_DEEPBIND"), "1");
  EXPECT_EQ(account->session_env.count("NSS_WRAPPER_OTHER"), 0U);
  EXPECT_FALSE(file_exists(home)) << "prepare writes nothing";
  ASSERT_TRUE(install_account(*account));
  EXPECT_NE(read_file(home + "/.nss_wrapper/passwd")->find("user1000870000:x:1000870000:0:"),
            std::string::npos);
  EXPECT_TRUE(file_exists(home + "/.nss_wrapper/group"));
  std::filesystem::remove_all(etc);
}

// mpi-sshd runs commands as its own uid by no name: a uid with no entry and no nss_wrapper
// is fine, nothing is rendered, and the home is $HOME. nss_wrapper's variables, where a site
// still sets them, are still honoured.
TEST(Account, TheBuiltInServerNeedsNoEntry) {
  std::string etc = temp_dir();
  ASSERT_TRUE(write_atomic(etc + "/passwd", kPasswd));
  ASSERT_TRUE(write_atomic(etc + "/group", kGroup));
  for (uid_t uid : {uid_t{1000870000}, uid_t{65534}, uid_t{0}}) {
    auto account = prepare_account({{"HOME", "/h"}}, uid, 0, SshServer::kMpiSshd, etc);
    ASSERT_TRUE(account) << uid << ": " << account.error().message;
    EXPECT_EQ(account->home, "/h");
    EXPECT_FALSE(account->nss);
    EXPECT_TRUE(account->session_env.empty());
  }
  auto wrapped = prepare_account({{"HOME", "/h"},
                                  {"NSS_WRAPPER_PASSWD", "/h/p"},
                                  {"NSS_WRAPPER_GROUP", "/h/g"},
                                  {"LD_PRELOAD", "libnss_wrapper.so"}},
                                 1000870000, 0, SshServer::kMpiSshd, etc);
  ASSERT_TRUE(wrapped) << wrapped.error().message;
  ASSERT_TRUE(wrapped->nss);
  EXPECT_NE(wrapped->nss->passwd.find("user1000870000:"), std::string::npos);
  auto half =
      prepare_account({{"HOME", "/h"}, {"NSS_WRAPPER_PASSWD", "/h/p"}}, 1000, 1000, SshServer::kMpiSshd, etc);
  EXPECT_FALSE(half) << "one of nss_wrapper's two files is still a mistake";
  std::filesystem::remove_all(etc);
}

// The files each server reads, and no others: mpi-sshd takes the job key alone; sshd reads
// authorized_keys and sshd_config too.
TEST(Account, TheIdentityHoldsWhatItsServerReads) {
  KeyPair key{"-----BEGIN OPENSSH PRIVATE KEY-----\n", "ssh-ed25519 AAAA trainer-mpi", "id_ed25519"};
  for (bool for_openssh : {false, true}) {
    std::string home = temp_dir();
    SshLayout layout{home + "/.ssh", 2222, home, {}, std::nullopt, for_openssh};
    ASSERT_TRUE(install_identity(key, layout, nullptr));
    EXPECT_TRUE(file_exists(layout.ssh_dir + "/id_ed25519"));
    EXPECT_TRUE(file_exists(layout.ssh_dir + "/config"));
    EXPECT_EQ(file_exists(layout.ssh_dir + "/authorized_keys"), for_openssh);
    EXPECT_EQ(file_exists(layout.ssh_dir + "/sshd_config"), for_openssh);
    std::filesystem::remove_all(home);
  }
}

TEST(Account, StrictModesIsJudgedAsSshdWalksTheFolders) {
  std::string home = temp_dir();
  std::string ssh = home + "/.ssh";
  ASSERT_TRUE(make_dirs(ssh, 0700));
  chmod(home.c_str(), 0755);
  EXPECT_EQ(strict_modes_problem(ssh, home, getuid()), std::nullopt);
  // An emptyDir as Kubernetes makes it with fsGroup: 2777.
  chmod(home.c_str(), 02777);
  auto problem = strict_modes_problem(ssh, home, getuid());
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find(home + " is owned by uid"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("mode 2777"), std::string::npos) << *problem;
  // The walk stops at the home: a world-writable folder above it does not count.
  ASSERT_TRUE(make_dirs(home + "/h/.ssh", 0700));
  chmod((home + "/h").c_str(), 0700);
  EXPECT_EQ(strict_modes_problem(home + "/h/.ssh", home + "/h", getuid()), std::nullopt);
  std::filesystem::remove_all(home);
}

TEST(Account, SshdConfigTurnsStrictModesOffOnlyWithAReasonAndPassesTheEnv) {
  KeyPair key{"", "ssh-ed25519 AAAA trainer-mpi", "id_ed25519"};
  SshLayout layout{"/home/u/.ssh", 2222, "/home/u", {}, std::nullopt};
  std::string strict = render_sshd_config(key, layout);
  EXPECT_EQ(strict.find("StrictModes"), std::string::npos);
  EXPECT_EQ(strict.find("SetEnv"), std::string::npos);
  layout.strict_modes_problem = "/home/u is owned by uid 0 with mode 2777";
  layout.session_env = {{"LD_PRELOAD", "libnss_wrapper.so"}, {"NSS_WRAPPER_PASSWD", "/home/u/a b"}};
  std::string config = render_sshd_config(key, layout);
  EXPECT_NE(
      config.find("# StrictModes would refuse authorized_keys: /home/u is owned by uid 0 with mode 2777"),
      std::string::npos)
      << config;
  EXPECT_NE(config.find("\nStrictModes no\n"), std::string::npos);
  EXPECT_NE(config.find("\nSetEnv LD_PRELOAD=libnss_wrapper.so \"NSS_WRAPPER_PASSWD=/home/u/a b\"\n"),
            std::string::npos)
      << config;
}

// A key of another type that the programs would read first (common/job_key.h), left in an
// ssh folder that outlived its job, is refused before anything is written; one they read
// after this job's does no harm.
TEST(Account, AnotherKeyReadBeforeTheJobsIsRefusedBeforeAnyWrite) {
  std::string home = temp_dir();
  SshLayout layout{home + "/.ssh", 2222, "", {}, std::nullopt};
  ASSERT_TRUE(make_dirs(layout.ssh_dir, 0700));
  ASSERT_TRUE(write_atomic(layout.ssh_dir + "/id_ed25519", "an earlier job's key", {0600}));
  KeyPair ecdsa{"this job's key", "ecdsa-sha2-nistp521 AAAA trainer-mpi", "id_ecdsa"};
  auto refused = install_identity(ecdsa, layout, nullptr);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().exit, Exit::kIo);
  EXPECT_NE(refused.error().message.find("it holds id_ed25519, another key than this job's id_ecdsa"),
            std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(file_exists(layout.ssh_dir + "/id_ecdsa")) << "written before the check";
  std::filesystem::remove(layout.ssh_dir + "/id_ed25519");
  ASSERT_TRUE(write_atomic(layout.ssh_dir + "/id_rsa", "an earlier job's key", {0600}));
  ASSERT_TRUE(install_identity(ecdsa, layout, nullptr));
  auto read_back = find_job_key(layout.ssh_dir);
  ASSERT_TRUE(read_back);
  EXPECT_EQ(read_back->text, "this job's key");
  std::filesystem::remove_all(home);
}

}  // namespace
}  // namespace tmpi::init

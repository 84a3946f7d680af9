// See account.h. The passwd and group texts are rendered by pure functions; the environment
// and /etc are read once in prepare_account, and only install_account writes.
#include "initcontainer/account.h"

#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>

#include "common/files.h"
#include "common/utf8.h"

namespace tmpi::init {

namespace {

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ':') {
      fields.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  }
  return fields;
}

// The numeric id in field `index` of a passwd (uid: 2) or group (gid: 2) line, if any.
std::optional<unsigned long> id_field(std::string_view line, std::size_t index, std::size_t fields_wanted) {
  auto fields = split_fields(line);
  if (fields.size() != fields_wanted || fields[index].empty()) return std::nullopt;
  unsigned long id = 0;
  auto [end, ec] = std::from_chars(fields[index].data(), fields[index].data() + fields[index].size(), id);
  if (ec != std::errc() || end != fields[index].data() + fields[index].size()) return std::nullopt;
  return id;
}

template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    fn(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

std::string env_or(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::string parent_of(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Whether a login shell runs commands: not nologin or false, wherever they live (an empty
// one is /bin/sh to sshd: OpenSSH's session.c, "shell = ... _PATH_BSHELL").
bool runs_commands(const std::string& shell) {
  std::string name = std::filesystem::path(shell).filename().string();
  return name != "nologin" && name != "false";
}

// The home of `uid`'s entry in the passwd text, if it has one.
std::optional<std::string> home_of(std::string_view etc_passwd, uid_t uid) {
  std::optional<std::string> home;
  for_each_line(etc_passwd, [&](std::string_view line) {
    if (!home && id_field(line, 2, 7) == uid) home = std::string(split_fields(line)[5]);
  });
  return home;
}

// Without nss_wrapper, for OpenSSH: the system's NSS decides (an LDAP or sssd user is fine
// too), and a uid it does not know is refused with what to set.
Expected<std::string> home_from_system(const std::optional<std::string>& entry_home, uid_t uid) {
  if (entry_home) return *entry_home;
  const passwd* pw = getpwuid(uid);
  if (pw == nullptr) {
    return make_error(Exit::kUsage,
                      "uid {} has no passwd entry, and OpenSSH's sshd refuses to run without one: set "
                      "LD_PRELOAD=libnss_wrapper.so, NSS_WRAPPER_PASSWD and NSS_WRAPPER_GROUP (files "
                      "mpi-init writes, under HOME) in every container (manifests/openssh), or run the "
                      "built-in server (--ssh-server mpi-sshd), which needs none",
                      uid);
  }
  return std::string(pw->pw_dir);
}

}  // namespace

std::string render_nss_passwd(std::string_view etc_passwd, uid_t uid, gid_t gid, const std::string& home,
                              std::vector<std::string>* notes) {
  std::string out;
  bool found = false;
  for_each_line(etc_passwd, [&](std::string_view line) {
    if (!found && id_field(line, 2, 7) == uid) {
      // sshd gives a session the entry's home, and finds nothing of ours elsewhere.
      auto fields = split_fields(line);
      found = true;
      if (fields[5] != home && notes != nullptr)
        notes->push_back(fmt::format("uid {} ({}): home {} -> {}", uid, fields[0], fields[5], home));
      // sshd runs every command through the entry's shell: an image's nobody (65534) has
      // /usr/sbin/nologin, which prints "This account is currently not available" and runs
      // nothing, so MPI's daemons could never start. Such a shell becomes /bin/sh.
      std::string shell(fields[6]);
      if (!runs_commands(shell)) {
        if (notes != nullptr)
          notes->push_back(fmt::format("uid {} ({}): shell {} -> /bin/sh", uid, fields[0], shell));
        shell = "/bin/sh";
      }
      out += fmt::format("{}:{}:{}:{}:{}:{}:{}\n", fields[0], fields[1], fields[2], fields[3], fields[4],
                         home, shell);
      return;
    }
    out += line;
    out += '\n';
  });
  if (!found) {
    out += fmt::format("user{0}:x:{0}:{1}:trainer-mpi:{2}:/bin/sh\n", uid, gid, home);
    if (notes != nullptr)
      notes->push_back(fmt::format("uid {} has no passwd entry: added user{} ({})", uid, uid, home));
  }
  return out;
}

std::string render_nss_group(std::string_view etc_group, gid_t gid, std::vector<std::string>* notes) {
  std::string out;
  bool found = false;
  for_each_line(etc_group, [&](std::string_view line) {
    found = found || id_field(line, 2, 4) == gid;
    out += line;
    out += '\n';
  });
  if (!found) {
    out += fmt::format("group{0}:x:{0}:\n", gid);
    if (notes != nullptr) notes->push_back(fmt::format("gid {} has no group entry: added group{}", gid, gid));
  }
  return out;
}

Expected<Account> prepare_account(const std::map<std::string, std::string>& env, uid_t uid, gid_t gid,
                                  SshServer server, const std::string& etc) {
  Account account;
  account.uid = uid;
  account.gid = gid;
  std::string passwd_path = env_or(env, "NSS_WRAPPER_PASSWD");
  std::string group_path = env_or(env, "NSS_WRAPPER_GROUP");
  if (passwd_path.empty() != group_path.empty()) {
    return make_error(Exit::kUsage,
                      "NSS_WRAPPER_PASSWD and NSS_WRAPPER_GROUP: nss_wrapper needs both, one is unset; "
                      "set both to files mpi-init may write (manifests/openssh)");
  }
  if (server == SshServer::kMpiSshd && passwd_path.empty()) {
    // mpi-sshd runs commands as its own uid, by no name: no entry to find or to write.
    account.home = env_or(env, "HOME");
    return account;
  }
  TMPI_ASSIGN(std::string etc_passwd, read_file(etc + "/passwd"));
  std::optional<std::string> entry_home = home_of(etc_passwd, uid);
  std::string home = env_or(env, "HOME");
  if (passwd_path.empty()) {
    TMPI_ASSIGN(account.home, home_from_system(entry_home, uid));
    return account;
  }
  if (home.empty()) {
    return make_error(
        Exit::kUsage,
        "HOME is unset: with NSS_WRAPPER_PASSWD, mpi-init gives uid {} the home $HOME; set HOME "
        "to the pod's writable home (an emptyDir) in every container",
        uid);
  }
  // HOME becomes a field of the passwd entry: a ':' would shift the fields after it, and a
  // line break would add an entry.
  if (std::any_of(home.begin(), home.end(),
                  [](char c) { return c == ':' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return make_error(
        Exit::kUsage,
        "HOME {}: a passwd entry cannot hold ':' or control characters; set HOME to a plain path",
        dump_json(nlohmann::json(truncate_utf8(home, 200, "..."))));
  }
  TMPI_ASSIGN(std::string etc_group, read_file(etc + "/group"));
  account.home = home;
  account.nss =
      NssFiles{passwd_path, group_path, render_nss_passwd(etc_passwd, uid, gid, home, &account.notes),
               render_nss_group(etc_group, gid, &account.notes)};
  std::string preload = env_or(env, "LD_PRELOAD");
  if (preload.find("nss_wrapper") == std::string::npos) {
    account.warnings.push_back(fmt::format(
        "NSS_WRAPPER_PASSWD is set but LD_PRELOAD ({}) does not load libnss_wrapper.so: nothing will read {}",
        preload.empty() ? "unset" : preload, passwd_path));
  }
  // nss_wrapper's own switches too, when set: NSS_WRAPPER_DISABLE_DEEPBIND is what a
  // sanitized build needs (ASan refuses the RTLD_DEEPBIND with which nss_wrapper loads libc).
  for (const char* name :
       {"LD_PRELOAD", "NSS_WRAPPER_PASSWD", "NSS_WRAPPER_GROUP", "NSS_WRAPPER_DISABLE_DEEPBIND"}) {
    std::string value = env_or(env, name);
    if (value.empty()) continue;
    if (value.find_first_of("\"\n\r") != std::string::npos) {
      return make_error(Exit::kUsage,
                        "{}: a quote or line break cannot pass through sshd_config's SetEnv; "
                        "remove it from the value",
                        name);
    }
    account.session_env[name] = value;
  }
  return account;
}

Status install_account(const Account& account) {
  if (!account.nss) return ok_status();
  for (const auto* path : {&account.nss->passwd_path, &account.nss->group_path}) {
    // Only a missing folder is made (and chmodded): an emptyDir's root is not ours to chmod.
    if (std::string dir = parent_of(*path); !file_exists(dir)) TMPI_CHECK(make_dirs(dir, 0755));
  }
  TMPI_CHECK(write_atomic(account.nss->passwd_path, account.nss->passwd, {0644}));
  TMPI_CHECK(write_atomic(account.nss->group_path, account.nss->group, {0644}));
  return ok_status();
}

std::optional<std::string> strict_modes_problem(const std::string& ssh_dir, const std::string& home,
                                                uid_t uid) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::canonical(ssh_dir, ec);
  if (ec) return fmt::format("{}: {}", ssh_dir, ec.message());
  std::filesystem::path home_path = std::filesystem::canonical(home, ec);
  bool compare_home = !ec;  // as sshd: without a resolvable home it walks up to /
  for (;;) {
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0) return fmt::format("{}: {}", dir.string(), std::strerror(errno));
    if ((st.st_uid != 0 && st.st_uid != uid) || (st.st_mode & 022) != 0) {
      return fmt::format("{} is owned by uid {} with mode {:04o}", dir.string(), st.st_uid,
                         st.st_mode & 07777);
    }
    if ((compare_home && dir == home_path) || dir == dir.root_path()) return std::nullopt;
    dir = dir.parent_path();
  }
}

}  // namespace tmpi::init

// The running uid's account, as OpenSSH's sshd and ssh need it when a pod runs as non-root
// (mpi-init --ssh-server openssh; the default server, mpi-sshd, needs none of this).
//
// Both OpenSSH programs look the running uid up: ssh refuses to start without a passwd
// entry ("No user exists for uid N"), and sshd logs a user in by name, takes its home from
// the entry, and can only log in the uid it runs as. Pod Security "restricted" clusters run
// pods as uid 1000 (an entry in the image), and OpenShift's restricted SCC as an arbitrary
// uid that no /etc/passwd lists. nss_wrapper (Debian: libnss-wrapper) gives every process
// that preloads it (LD_PRELOAD=libnss_wrapper.so) the passwd and group files named by
// NSS_WRAPPER_PASSWD and NSS_WRAPPER_GROUP; when those are set, mpi-init writes them: the
// image's entries, with the running uid's home set to $HOME (where the ssh folder lives),
// plus an entry for a uid or gid the image lacks. The same variables go into sshd_config's
// SetEnv, so the ssh sessions (MPI's daemons, the ranks) resolve the uid too.
//
// sshd's StrictModes refuses authorized_keys when a folder above it, up to the user's home,
// is owned by another uid or may be written by group or others. A Kubernetes emptyDir is
// root-owned and mode 0777 (2777, group fsGroup, with fsGroup), and only root may chmod it:
// strict_modes_problem() walks the folders as sshd does and names the one that fails, so
// that StrictModes is turned off only where it would refuse the job's own key.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "initcontainer/role.h"

namespace tmpi::init {

struct NssFiles {
  std::string passwd_path, group_path;  // NSS_WRAPPER_PASSWD, NSS_WRAPPER_GROUP
  std::string passwd, group;            // their rendered content
};

struct Account {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;             // the home sshd will see: the entry's, or $HOME with nss_wrapper
  std::optional<NssFiles> nss;  // set when NSS_WRAPPER_PASSWD is
  std::map<std::string, std::string> session_env;  // for sshd_config's SetEnv
  std::vector<std::string> notes;                  // what was added or changed, for the log
  std::vector<std::string> warnings;               // a setting that cannot work as given
};

// Pure: the image's passwd text with the entry of `uid` given `home` (added, named user<uid>
// with shell /bin/sh, when no line has that uid), and the group text with a group<gid> line
// when no line has that gid. Unparsable lines (comments, NIS markers) are kept as they are.
std::string render_nss_passwd(std::string_view etc_passwd, uid_t uid, gid_t gid, const std::string& home,
                              std::vector<std::string>* notes = nullptr);
std::string render_nss_group(std::string_view etc_group, gid_t gid,
                             std::vector<std::string>* notes = nullptr);

// Reads the environment (HOME, LD_PRELOAD, NSS_WRAPPER_PASSWD, NSS_WRAPPER_GROUP), /etc/passwd
// and /etc/group (`etc` is the folder, for tests), and, for OpenSSH's sshd, checks that it
// will find the uid: with neither an entry nor nss_wrapper it fails (exit 64) naming the
// variables to set. mpi-sshd needs no entry: without nss_wrapper's variables the account is
// the uid and $HOME, and nothing is written. Writes nothing.
Expected<Account> prepare_account(const std::map<std::string, std::string>& env, uid_t uid, gid_t gid,
                                  SshServer server, const std::string& etc = "/etc");
// Writes the nss_wrapper files, if any (atomic, 0644; a missing folder is made 0755).
Status install_account(const Account& account);

// Why sshd's StrictModes would refuse `ssh_dir`/authorized_keys for `uid` with home `home`, as
// OpenSSH's auth_secure_path() walks it: from ssh_dir up to home (or up to / when ssh_dir is
// not under home), each folder owned by root or uid and not writable by group or others.
// nullopt when sshd would accept it.
std::optional<std::string> strict_modes_problem(const std::string& ssh_dir, const std::string& home,
                                                uid_t uid);

}  // namespace tmpi::init

// A channel's command as a process: started in a session (and process group) of its own, as
// sshd's child calls setsid() (openssh-portable session.c, do_exec_no_pty and do_exec_pty),
// so that the whole group can be hung up and killed when the client goes, and nothing it
// does reaches the server's own group. Its stdin, stdout and stderr are non-blocking pipes,
// or one pty for a channel that asked for a terminal. It starts clean, whatever the server
// itself was started with: every signal at its default action and none blocked, no
// descriptor but its stdin, stdout and stderr, and HOME as its working folder, as sshd's
// child starts (session.c, do_child: "Could not chdir to home directory", then "/").
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "common/error.h"
#include "nodessh/channel_rules.h"

namespace tmpi::nodessh {

struct TerminalSize {
  int columns = 80;
  int rows = 24;
  int width_px = 0;
  int height_px = 0;
};

struct StartedCommand {
  pid_t pid = -1;      // also its process group's and session's id
  int stdin_fd = -1;   // with a pty, the master: stdin, stdout and stdout_fd are the same
  int stdout_fd = -1;  // -1 once closed
  int stderr_fd = -1;  // -1 with a pty, where stderr goes to the terminal too
};

// Starts command.argv with this process's environment, `base` over it (HOME), and the
// command's accepted variables over that, in base's HOME ("/" where it has none). The
// descriptors returned are the caller's to close.
Expected<StartedCommand> start_command(const Command& command, const std::map<std::string, std::string>& base,
                                       const TerminalSize& size);

// The first of kSftpServerPaths that is a program this process may run; "" where the image has
// none.
std::string find_sftp_server();

// Sets a pty's size (window-change).
void resize_terminal(int master_fd, const TerminalSize& size);

// Whether any process is left in process group `pgid`.
bool group_alive(pid_t pgid);

}  // namespace tmpi::nodessh

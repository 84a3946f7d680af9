// mpi-ssh-client's connection: ssh for MPI's daemons where OpenSSH's client cannot run.
//
// OpenSSH's ssh looks its own uid up before anything else and exits "No user exists for uid
// N" where passwd has no entry: an arbitrary uid (OpenShift's) in a pod with no nss_wrapper,
// as under the node pods' own server (mpi-sshd), which needs none. MPI's launches that have
// no relay to go through (the fabric check's mpirun, the placement probe, `--ssh-check
// before`) would then fail on their first daemon. mpi-ssh (ssh/main.cpp) hands such a
// command line to this client instead, which connects with libssh and runs the command over
// its own session (ssh/channel.h), as the relay does over the check's.
//
// It honours exactly what the launcher gives MPI's ssh, and what a person types in
// `mpi-launcher shell` (no command, -t, -T: ssh/terminal.h), and refuses the rest by name (the
// real ssh is no option here): -p, -l, -i (or -o IdentityFile), -o UserKnownHostsFile with
// -o StrictHostKeyChecking=yes (host keys are only ever checked against a file it is given,
// never taken on first use), -F only as /dev/null; the options ssh/call.cpp ignores change
// nothing it does. The user asked for is -l's, else the running user's name as the ssh
// check has it (common/ssh_probe.h: passwd, else $USER, else root); mpi-sshd takes any.
#pragma once

#include <optional>
#include <string>

#include "common/backoff.h"
#include "common/error.h"
#include "common/ssh_probe.h"
#include "ssh/call.h"

namespace tmpi::launch {

// Why this client cannot run `call` as ssh would, or nullopt.
std::optional<std::string> client_cannot_serve(const SshCall& call);

// A session to the call's host, its host key found in the known-hosts file for that host
// and port, logged in with the identity file's key; else why not, in ssh's terms.
Expected<SshSessionPtr> open_client_session(const SshCall& call, Millis timeout);

}  // namespace tmpi::launch

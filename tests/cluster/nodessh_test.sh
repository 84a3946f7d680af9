#!/usr/bin/env bash
# mpi-sshd, the node's own SSH server, against OpenSSH's own client, Open MPI 4's mpirun and
# ssh-audit. Each node pod runs mpi-sshd as uid 1234567, which has no passwd entry there,
# with no capability and no new privileges: the identity is what `mpi-init --role node`
# writes, the launcher's ssh config (strict host key checking on the job key) is mpi-init's.
# Proves: exec with its exit status, stdout and stderr apart, the uid, SSH_CONNECTION and
# SSH_CLIENT; exit-signal; env requests (a listed one passed, another refused); a wrong key
# refused; `ssh -L` refused by name; the client killed and the command's process group gone
# (a group that ignores SIGHUP too: SIGKILL after the grace); mpirun's hello over 2 nodes; no
# [fail] from ssh-audit; mpi-launcher run under Open MPI 4 and MPICH, with the fabric check;
# `ssh HOST COMMAND` typed in mpi-launcher shell.
# Usage (under cib run): nodessh_test.sh
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
uid=1234567
sub=$(subdomain); launcher=$(launcher_pod); nodes=($(node_pods)); node=${nodes[0]}.$sub
as_uid=(setpriv --reuid "$uid" --regid "$uid" --clear-groups --no-new-privs --bounding-set -all --inh-caps -all)

init_launcher --slots 2
for pod in "${nodes[@]}"; do
  in_pod "$pod" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-secret "$SECRET" --log-level warn
  home="$CIB_DIR/pods/$pod/home"
  chown "$uid:$uid" "$home"; chown -R "$uid:$uid" "$home/.ssh"  # HOME is the pod uid's
  [[ -z $(in_pod "$pod" getent passwd "$uid") ]] || fail "uid $uid has a passwd entry in $pod"
  # The first node's server runs at its defaults (the ssh dir is $HOME/.ssh, the hangup's
  # grace 2 s); the second's has short graces: a connection that never logs in is closed.
  options=()
  [[ $pod == "${nodes[1]}" ]] && options=(--ssh-dir "$home/.ssh" --sshd-hangup-grace 1s --sshd-login-grace 2s)
  "$CIB" exec "$pod" -- "${as_uid[@]}" "$TMPI_BUILD_DIR/bin/mpi-sshd" "${options[@]}" \
    >"$CIB_DIR/pods/$pod/mpi-sshd.log" 2>&1 </dev/null &
done
for pod in "${nodes[@]}"; do wait_mpi_sshd "$pod"; done
log="$CIB_DIR/pods/${nodes[0]}/mpi-sshd.log"

# exec: the status, stdout and stderr apart, the server's uid, HOME, SSH_CONNECTION and
# SSH_CLIENT (the client's address and port, the server's, as sshd sets them).
rc=0; out=$(in_pod "$launcher" ssh "$node" 'echo out; id -u; echo "home=$HOME"; echo err >&2
  echo "$SSH_CONNECTION"; echo "$SSH_CLIENT"; exit 7' 2>"$CIB_DIR/err") || rc=$?
expect_eq "$rc" 7 "exec's exit status"
expect_eq "$(head -n 3 <<<"$out")" "out"$'\n'"$uid"$'\n'"home=$CIB_DIR/pods/${nodes[0]}/home" "exec's stdout"
expect_eq "$(cat "$CIB_DIR/err")" "err" "exec's stderr, apart from stdout"
client_ip=$("$CIB" ip "$launcher"); server_ip=$("$CIB" ip "${nodes[0]}")
[[ $(sed -n 4p <<<"$out") =~ ^"$client_ip "([0-9]+)" $server_ip 2222"$ ]] ||
  fail "SSH_CONNECTION is '$(sed -n 4p <<<"$out")', not '$client_ip PORT $server_ip 2222'"
expect_eq "$(sed -n 5p <<<"$out")" "$client_ip ${BASH_REMATCH[1]} 2222" "SSH_CLIENT"
pass "exec as uid $uid with no passwd entry: status 7, stdout and stderr apart, SSH_CONNECTION"

# exit-signal: OpenSSH's client reads it (its debug log names it) and exits 255.
rc=0; in_pod "$launcher" ssh -v "$node" 'kill -TERM $$' 2>"$CIB_DIR/err" || rc=$?
expect_eq "$rc" 255 "a command killed by a signal"
expect_contains "$(cat "$CIB_DIR/err")" "rtype exit-signal" "the exit-signal request"
pass "a signalled command comes back as exit-signal"

# env: LANG is accepted by default; another name is refused by name.
out=$(in_pod "$launcher" env LANG=C.UTF-8 TMPI_NOT_LISTED=x \
  ssh -o SendEnv=LANG -o SendEnv=TMPI_NOT_LISTED "$node" 'echo "$LANG/${TMPI_NOT_LISTED:-unset}"')
expect_eq "$out" "C.UTF-8/unset" "env requests"
expect_contains "$(cat "$log")" 'env "TMPI_NOT_LISTED" refused' "the refused env request in the log"
pass "env: LANG passed, TMPI_NOT_LISTED refused and named"

# Only the job key logs in.
ssh-keygen -q -t ed25519 -N '' -f "$CIB_DIR/stranger"
if in_pod "$launcher" ssh -F /dev/null -i "$CIB_DIR/stranger" -o BatchMode=yes -o StrictHostKeyChecking=no \
  -o UserKnownHostsFile=/dev/null -p 2222 "$node" true 2>/dev/null; then
  fail "a key other than the job's logged in"
fi
expect_contains "$(cat "$log")" "refused: not the job key" "the refused key in the log"
pass "another key is refused"

# The session process's sandbox (nodessh/sandbox.h): a server whose session processes try,
# inside it and before the key exchange, to open the job key, to run a program and to open a
# socket, and to have the monitor start a command before any login; each is refused and
# named, and the server still serves the job key's login. Its spare connection process
# (listener.cpp) probes before any client has connected at all: sandboxed before its client.
probe_home="$CIB_DIR/pods/${nodes[0]}/home"
("$CIB" exec "${nodes[0]}" -- "${as_uid[@]}" env MPI_SSHD_SANDBOX_PROBE="$probe_home/.ssh/id_ed25519" \
  "$TMPI_BUILD_DIR/bin/mpi-sshd" --ssh-port 2223 >"$CIB_DIR/probe-sshd.log" 2>&1 </dev/null) &
probes() { grep -c "sandbox probe: a command before login refused" "$CIB_DIR/probe-sshd.log" || true; }
for _ in $(seq 200); do (($(probes) >= 1)) && break; sleep 0.05; done
expect_eq "$(probes)" 1 "the spare's probe, before any client: $(cat "$CIB_DIR/probe-sshd.log")"
out=$(in_pod "$launcher" ssh -p 2223 -o HostKeyAlias="[$node]:2222" "$node" 'echo served' 2>&1) ||
  fail "no login through the sandboxed session process: $out; its log: $(cat "$CIB_DIR/probe-sshd.log")"
expect_eq "$out" "served" "the command through the sandboxed session process"
probe_log=$(cat "$CIB_DIR/probe-sshd.log")
for what in "open of the job key" "execve of /bin/true" "a new socket" "a queued signal to the monitor" \
  "a rename of the job key" "a lower priority for the monitor" "a socket's owner for SIGIO"; do
  expect_contains "$probe_log" "sandbox probe: $what refused: Operation not permitted" "the sandbox's refusal"
done
expect_contains "$probe_log" "sandbox probe: a command before login refused: not logged in" "the monitor's refusal"
! grep -q "went through" <<<"$probe_log" || fail "the sandbox let a call through: $probe_log"
expect_contains "$probe_log" "sandbox probe: a signal to itself allowed" "the sandbox's own pid"
pass "the session process's sandbox: the job key's file (open, rename), execve, a socket, a queued signal, a priority and a SIGIO owner aimed at the monitor refused and named; a command asked of the monitor before login refused; the login served"

# The spare: each login takes it and another is made, sandboxed before its client; however
# many logins, the server holds its listener and one spare pair (monitor, session process)
# once they have ended; SIGTERM leaves none of them.
probe_listener=$(ip netns exec "$("$CIB" ns "${nodes[0]}")" ss -Hltnp 'sport = :2223' | grep -o 'pid=[0-9]*' | head -n 1)
probe_listener=${probe_listener#pid=}
[[ -n $probe_listener ]] || fail "no listener on 2223"
for _ in 1 2 3 4 5; do
  in_pod "$launcher" ssh -p 2223 -o HostKeyAlias="[$node]:2222" "$node" true || fail "a login through a spare failed"
done
descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }
for _ in $(seq 100); do (($(probes) == 7)) && [[ $(descendants "$probe_listener" | wc -l) == 2 ]] && break; sleep 0.05; done
expect_eq "$(probes)" 7 "one spare's probe before each of 6 logins and one after the last"
server_processes=($(descendants "$probe_listener"))
expect_eq "${#server_processes[@]}" 2 "the server's processes but its listener after 6 logins: $(ps -o pid=,args= -p "${server_processes[*]}" 2>/dev/null)"
kill "$probe_listener"
for _ in $(seq 100); do kill -0 "$probe_listener" "${server_processes[@]}" 2>/dev/null || break; sleep 0.05; done
for pid in "$probe_listener" "${server_processes[@]}"; do
  ! kill -0 "$pid" 2>/dev/null || fail "process $pid of the stopped server is left: $(ps -o args= -p "$pid")"
done
pass "a spare connection process sandboxed before each client; after 6 logins the listener and one spare pair; none left after SIGTERM"

# ssh -L: the forward's listener is the client's; every connection through it is refused.
# (exec: $! is ssh itself, which cib exec and nsenter become, not a subshell around it)
(exec "$CIB" exec "$launcher" -- ssh -o LogLevel=INFO -N -L 127.0.0.1:23456:127.0.0.1:2222 "$node") 2>"$CIB_DIR/forward.err" &
forward=$!
for _ in $(seq 100); do
  ip netns exec "$("$CIB" ns "$launcher")" bash -c 'exec 3<>/dev/tcp/127.0.0.1/23456' 2>/dev/null && break
  sleep 0.05
done
for _ in $(seq 50); do grep -q "administratively prohibited" "$CIB_DIR/forward.err" && break; sleep 0.05; done
kill "$forward"; wait "$forward" 2>/dev/null || true
expect_contains "$(cat "$CIB_DIR/forward.err")" "administratively prohibited" "ssh -L's channel"
expect_contains "$(cat "$log")" 'port forwarding (direct-tcpip to "127.0.0.1:2222") refused' "the refusal in the log"
pass "ssh -L: the forwarded connection is refused, and named in the log"

# The client goes (SIGKILL: its connection just closes): the command's group, which ignores
# SIGHUP, is killed after the default 2 s grace.
(exec "$CIB" exec "$launcher" -- ssh "$node" 'trap "" HUP; echo $$; sleep 300 & exec sleep 301') >"$CIB_DIR/group" &
client=$!
for _ in $(seq 100); do [[ -s $CIB_DIR/group ]] && break; sleep 0.05; done
group=$(head -n 1 "$CIB_DIR/group")
[[ $group =~ ^[0-9]+$ ]] && pgrep -g "$group" >/dev/null || fail "the remote command's group did not start"
t0=$(date +%s%N)
kill -9 "$client"; wait "$client" 2>/dev/null || true
# Alive: not a zombie (the orphan `sleep 300` waits there for this machine's init to reap it).
alive() { ps -o stat= -g "$1" 2>/dev/null | grep -qv '^Z'; }
for _ in $(seq 100); do alive "$group" || break; sleep 0.05; done
alive "$group" && fail "process group $group outlived its client: $(ps -o pid=,stat=,args= -g "$group")"
expect_contains "$(cat "$log")" "SIGHUP to process group $group" "the hangup"
expect_contains "$(cat "$log")" "process group $group outlived the hangup's grace; SIGKILL" "the kill"
pass "the client killed: process group $group hung up, then killed, gone in $(ms_since "$t0") ms"

# The launcher's libssh side: the preflight's ssh check (`exec true` on the job key), then
# mpi-ssh through its relay (tests/cluster/ssh_relay_probe.cpp), as the runtimes launch.
key=$(ls "$CIB_DIR/pods/$launcher/home/.ssh" | grep -E '^id_[a-z0-9]+$' | head -n 1)
coproc PROBE { in_pod "$launcher" "$TMPI_BUILD_DIR/tests/cluster/ssh_relay_probe" \
  "$CIB_DIR/pods/$launcher/home/.ssh/$key" 2222 "${nodes[0]}.$sub" 2>&1; }
read -r -t 30 relay_socket <&"${PROBE[0]}" || fail "the relay probe did not start"
[[ $relay_socket == /* ]] || fail "the ssh check against mpi-sshd failed: $relay_socket"
seq 1 200000 >"$CIB_DIR/in"
rc=0; in_pod "$launcher" env TMPI_SSH_RELAY="$relay_socket" "$TMPI_BUILD_DIR/bin/mpi-ssh" -p 2222 "${nodes[0]}.$sub" \
  'cat; echo "to stderr" >&2; exit 5' <"$CIB_DIR/in" >"$CIB_DIR/out" 2>"$CIB_DIR/err" || rc=$?
expect_eq "$rc" 5 "mpi-ssh's exit status through the relay"
cmp -s "$CIB_DIR/in" "$CIB_DIR/out" || fail "stdin through cat and back differs: $(wc -c <"$CIB_DIR/out") bytes"
expect_eq "$(cat "$CIB_DIR/err")" "to stderr" "stderr through the relay"
exec {PROBE[1]}>&-
# bash unsets PROBE_PID once it has reaped the coprocess, which may already have ended.
[[ -z ${PROBE_PID:-} ]] || wait "$PROBE_PID" 2>/dev/null || true
pass "the launcher's ssh check and relay: 1.3 MB through cat, stderr apart, status 5"
# No relay, and no ssh on PATH (an image without OpenSSH's client, as the image contract
# allows): mpi-ssh becomes mpi-ssh-client, with the same arguments (the launcher's for
# mpirun: the job key, the pinned known_hosts) and status.
ssh_dir="$CIB_DIR/pods/$launcher/home/.ssh"
rc=0; out=$(in_pod "$launcher" env PATH=/nonexistent "$TMPI_BUILD_DIR/bin/mpi-ssh" -F /dev/null -p 2222 \
  -i "$ssh_dir/$key" -o UserKnownHostsFile="$ssh_dir/known_hosts" -o StrictHostKeyChecking=yes "${nodes[0]}.$sub" \
  'echo by-client; exit 4' 2>"$CIB_DIR/err") || rc=$?
expect_eq "$rc:$out" "4:by-client" "mpi-ssh with no ssh on PATH: $(cat "$CIB_DIR/err")"
pass "mpi-ssh where the image has no ssh: mpi-ssh-client ran the command, status 4"

# Open MPI 4's mpirun, its daemons started through mpi-sshd with the plain OpenSSH client.
hostfile="$CIB_DIR/hostfile"
for pod in "${nodes[@]}"; do echo "$pod.$sub slots=2"; done >"$hostfile"
out=$(in_pod "$launcher" mpirun.openmpi --hostfile "$hostfile" -np 4 --mca plm_rsh_agent ssh \
  --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
  "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi")
expect_contains "$out" "rank 3/4 on ${nodes[1]}" "placement"
expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "allreduce"
pass "Open MPI 4: 4 ranks over ${#nodes[@]} nodes served by mpi-sshd"

# A connection that never logs in is closed at the login grace (2 s on the second node).
t0=$(date +%s%N)
ip netns exec "$("$CIB" ns "$launcher")" timeout 10 bash -c \
  "exec 3<>/dev/tcp/$("$CIB" ip "${nodes[1]}")/2222; cat <&3 >/dev/null" || fail "an idle connection was not closed"
took=$(ms_since "$t0")
# The line is the listener's, from the connection process's report, a moment after the close.
wait_for "closed: not logged in within 2 s" "$CIB_DIR/pods/${nodes[1]}/mpi-sshd.log" 5
(( took >= 1900 && took < 5000 )) || fail "the idle connection was closed after $took ms, not about 2 s"
pass "a connection that never logs in is closed after $took ms"

# ssh-audit: no algorithm it fails.
audit=$(in_pod "$launcher" ssh-audit -n -p 2222 "$node" 2>&1) || true
expect_contains "$audit" "(kex) curve25519-sha256" "ssh-audit's report"
if grep -F "[fail]" <<<"$audit"; then fail "ssh-audit fails an algorithm:"$'\n'"$audit"; fi
pass "ssh-audit: no [fail] ($(grep -c -F '[warn]' <<<"$audit") warn)"

# mpi-launcher run, its clients unchanged, the launcher too as uid $uid with no passwd entry
# (OpenSSH's client would exit "No user exists for uid"): the ssh wait and check (libssh;
# `exec true` under hydra), Open MPI's daemons through mpi-ssh and the relay, hydra's
# proxies through its launcher-exec wrapper, the fabric check's mpirun through mpi-ssh and
# mpi-ssh-client (no relay there), every rank under mpi-rank as the server's uid.
launcher_home="$CIB_DIR/pods/$launcher/home"
chown -R "$uid:$uid" "$launcher_home"
mkdir -p "$CIB_DIR/launcher-tmp"; chown "$uid:$uid" "$CIB_DIR/launcher-tmp"
[[ -z $(in_pod "$launcher" getent passwd "$uid") ]] || fail "uid $uid has a passwd entry in $launcher"
# Under the sanitizers Open MPI's run alone: our code on its path (the relay, mpi-ssh-client,
# the agents) is MPICH's too, and each run costs about 20 s there, within the hour's budget.
mpis=(openmpi mpich); [[ ${TMPI_SANITIZED:-OFF} != ON ]] || mpis=(openmpi)
for mpi in "${mpis[@]}"; do
  rc=0; out=$(in_pod "$launcher" "${as_uid[@]}" env TMPDIR="$CIB_DIR/launcher-tmp" "$TMPI_BUILD_DIR/bin/mpi-launcher" run \
    --hosts "$ETC_MPI/hosts.json" --report "$CIB_DIR/launcher-tmp/report.json" --iface eth0 --wait ssh --mpi "$mpi" \
    --check mpi -- "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_$mpi" 2>&1) || rc=$?
  expect_eq "$rc" 0 "mpi-launcher run ($mpi) as uid $uid against mpi-sshd: $out"
  expect_contains "$out" "result: pass" "$mpi's fabric check"
  expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "$mpi's allreduce under the launcher"
  expect_contains "$out" "rank 3/4 on ${nodes[1]}" "$mpi's placement"
  ! grep -q "No user exists" <<<"$out" || fail "OpenSSH's client ran for uid $uid: $out"
done
# mpi-ssh-client itself: a host its known-hosts file does not list or lists with another
# key, a key the server refuses, and no strict checking: each ends before any command, with
# exit 255 and the reason, as ssh's would.
client=(in_pod "$launcher" "${as_uid[@]}" "$TMPI_BUILD_DIR/bin/mpi-ssh-client" -F /dev/null -p 2222)
known="$launcher_home/.ssh/known_hosts"
rc=0; out=$("${client[@]}" -i "$launcher_home/.ssh/$key" -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \
  "$node" "touch $CIB_DIR/pods/${nodes[0]}/home/ran" 2>&1) || rc=$?
expect_eq "$rc" 255 "an unlisted host's exit"
expect_contains "$out" "/dev/null lists no host key for $node (port 2222)" "an unlisted host"
printf '[%s]:2222 %s\n' "$node" "$(cut -d' ' -f1,2 "$CIB_DIR/stranger.pub")" > "$CIB_DIR/launcher-tmp/wrong_known"
rc=0; out=$("${client[@]}" -i "$launcher_home/.ssh/$key" -o UserKnownHostsFile="$CIB_DIR/launcher-tmp/wrong_known" \
  -o StrictHostKeyChecking=yes "$node" "touch $CIB_DIR/pods/${nodes[0]}/home/ran" 2>&1) || rc=$?
expect_eq "$rc" 255 "another listed host key's exit"
expect_contains "$out" "$node presents another host key than $CIB_DIR/launcher-tmp/wrong_known lists for it" "another listed host key"
cp "$CIB_DIR/stranger" "$CIB_DIR/launcher-tmp/stranger"; chown "$uid:$uid" "$CIB_DIR/launcher-tmp/stranger"
rc=0; out=$("${client[@]}" -i "$CIB_DIR/launcher-tmp/stranger" -o UserKnownHostsFile="$known" -o StrictHostKeyChecking=yes \
  "$node" "touch $CIB_DIR/pods/${nodes[0]}/home/ran" 2>&1) || rc=$?
expect_eq "$rc" 255 "a refused key's exit"
expect_contains "$out" "$node refused the key $CIB_DIR/launcher-tmp/stranger" "a refused key"
rc=0; out=$("${client[@]}" -i "$launcher_home/.ssh/$key" -o UserKnownHostsFile="$known" "$node" true 2>&1) || rc=$?
expect_eq "$rc" 255 "no strict host key checking"
expect_contains "$out" "cannot run this as ssh would: no -o UserKnownHostsFile with -o StrictHostKeyChecking=yes" "the refusal"
[[ ! -e $CIB_DIR/pods/${nodes[0]}/home/ran ]] || fail "a command ran for a client that should have been refused"
pass "mpi-ssh-client: an unlisted host, another host key, a refused key and no strict checking end with 255 and the reason"
pass "mpi-launcher run as uid $uid with no passwd entry (Open MPI 4 and MPICH, with the fabric check) over mpi-sshd"

# A person's `ssh HOST` in `mpi-launcher shell` (kubectl exec -it LAUNCHER), as uid $uid
# with no passwd entry: the shell's ssh runs mpi-ssh with the job's options, and mpi-ssh
# runs mpi-ssh-client where OpenSSH's client would refuse the uid. The wrapper is the only
# thing the shell writes. First from a pipe, as a script would: a command, and a login whose
# shell reads its commands from stdin, as ssh runs it without a terminal.
out=$(printf '%s\n' "ssh ${nodes[1]}.$sub 'echo \"on \$(hostname) as \$(id -u)\"' </dev/null" \
         "echo 'echo \"piped \$((3 + 4)) on \$(hostname)\"; exit 5' | ssh ${nodes[1]}.$sub; echo \"login: \$?\"" exit |
  in_pod "$launcher" "${as_uid[@]}" env SHELL=/bin/sh TMPDIR="$CIB_DIR/launcher-tmp" \
    "$TMPI_BUILD_DIR/bin/mpi-launcher" shell --hosts "$ETC_MPI/hosts.json" 2>&1) || fail "the shell: $out"
expect_contains "$out" "ssh HOST [COMMAND]: to the job's pods, as MPI reaches them" "the shell's banner"
expect_contains "$out" "on ${nodes[1]} as $uid" "ssh HOST COMMAND in the shell"
expect_contains "$out" "piped 7 on ${nodes[1]}" "a login's shell reading a pipe"
expect_contains "$out" "login: 5" "the piped login's exit status"
! grep -q "No user exists" <<<"$out" || fail "OpenSSH's client ran for uid $uid in the shell: $out"
[[ -x $launcher_home/.ssh/bin/ssh ]] || fail "no ssh wrapper in the job's ssh folder"
# Then at a terminal (kubectl exec -it): the shell on a pty of 33x101, `ssh HOST` typed in
# it. The login gets a pty of the terminal's size and TERM; the window grows and the remote
# pty follows; a Ctrl-C stops the remote command, not the session; `exit 7` is the session's
# status; the local terminal is as it was before (stty -g). Each output is told from the
# typed line's echo by arithmetic only the shell does ($((1 + 1)) prints 2); the local
# shell's prompt is its own (PS1), so that nothing is typed after `exit 7` before the session
# has ended (the client would send it to the closing channel, as ssh would).
out=$(in_pod "$launcher" "${as_uid[@]}" env SHELL=/bin/sh TERM=xterm-256color PS1='local> ' TMPDIR="$CIB_DIR/launcher-tmp" \
  python3 "$here/pty_session.py" --rows 33 --cols 101 \
    'expect:to the job.s pods' 'send:stty -g > "$TMPDIR/stty-before"; ssh '"${nodes[1]}.$sub"'\r' \
    'send:echo "A$((1 + 1))B tty=$(tty) size=$(stty size) term=$TERM user=$(id -u)@$(hostname)"\r' \
    'expect:A2B tty=/dev/pts/[0-9]+ size=33 101 term=xterm-256color user='"$uid@${nodes[1]}" \
    'resize:40x120' 'send:echo "C$((2 + 1))D size=$(stty size)"\r' 'expect:C3D size=40 120' \
    'send:echo "K$((10 + 1))L"; sleep 60\r' 'expect:K11L' 'pause:0.5' 'send:\x03' \
    'send:echo "E$((4 + 1))F on $(hostname)"\r' 'expect:E5F on '"${nodes[1]}" \
    'send:exit 7\r' 'expect:local> ' 'send:echo "G$((6 + 1))H rc=$?"; stty -g | cmp -s - "$TMPDIR/stty-before" && echo "I$((8 + 1))J same"\r' \
    'expect:G7H rc=7' 'expect:I9J same' 'send:exit\r' eof \
    -- "$TMPI_BUILD_DIR/bin/mpi-launcher" shell --hosts "$ETC_MPI/hosts.json" 2>&1) ||
  fail "a login at a terminal, as uid $uid: $out"
pass "mpi-launcher shell as uid $uid with no passwd entry: ssh HOST COMMAND runs on the pod; a login, piped and at a terminal (its size, TERM, a window change, a Ctrl-C, its exit status, the terminal put back)"

#!/usr/bin/env bash
# mpi-sshd against a person's tools and against clients that do not keep to the SSH window,
# from the launcher pod with the ssh config mpi-init writes there (as nodessh_test.sh).
# Proves: scp (SFTP, Debian 12's default), scp -O, sftp (put, get, ls) and rsync copy files
# byte for byte both ways; where the image has no sftp-server (every place of the server's
# list hidden in the second node's mount namespace) sftp is refused by name, the person told
# that scp -O works, and scp -O does; another subsystem is refused by name; a command inherits
# no descriptor of the server's (started with 3 and 7 open) and starts in HOME (or "/", with
# sshd's words, where HOME cannot be entered); and the server's resident memory stays within
# 32 MB of where it was while a client (1) fills its window as fast as the server takes, to a
# command that reads slowly, (2) sends beyond the window, to a command that does not read
# (the connection is closed), (3) grants a 2 GiB window and stops reading, the command
# writing without end; another session of the same server answers meanwhile.
# Usage (under cib run): nodessh_tools_test.sh
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
sub=$(subdomain); launcher=$(launcher_pod); nodes=($(node_pods))
node=${nodes[0]}.$sub; bare=${nodes[1]}.$sub  # bare: an image without sftp-server
log="$CIB_DIR/pods/${nodes[0]}/mpi-sshd.log"; bare_log="$CIB_DIR/pods/${nodes[1]}/mpi-sshd.log"

init_launcher --slots 2
# The second node's image has no sftp-server: each place of the server's own list
# (nodessh/channel_rules.h) holds /dev/null there, which is no program.
mapfile -t sftp_paths < <(grep -o '"/usr/[^"]*sftp-server"' "$here/../../nodessh/channel_rules.h" | tr -d '"')
((${#sftp_paths[@]} == 4)) || fail "the sftp-server list in channel_rules.h: ${sftp_paths[*]}"
for path in "${sftp_paths[@]}"; do
  [[ -e $path ]] || continue
  nsenter -t "$(cat "$CIB_DIR/pods/${nodes[1]}/pid")" -m mount --bind /dev/null "$path"
done
# Each server as its container starts it, but with descriptors 3 and 7 open (a script's
# redirections, which carry no close-on-exec), in a working folder that is not HOME; the
# second one's HOME cannot be entered. A small ASan quarantine where the build has one: freed
# memory held there would count as resident.
for pod in "${nodes[@]}"; do
  in_pod "$pod" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-secret "$SECRET" --log-level warn
  home=("HOME=$CIB_DIR/pods/$pod/home")
  [[ $pod == "${nodes[1]}" ]] && home=("HOME=$CIB_DIR/no-such-home" --ssh-dir "$CIB_DIR/pods/$pod/home/.ssh")
  (cd "$CIB_DIR" && exec "$CIB" exec "$pod" -- env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4" \
    "${home[0]}" "$TMPI_BUILD_DIR/bin/mpi-sshd" "${home[@]:1}" \
    >"$CIB_DIR/pods/$pod/mpi-sshd.log" 2>&1 </dev/null 3</dev/null 7>"$CIB_DIR/inherited") &
done
for pod in "${nodes[@]}"; do wait_mpi_sshd "$pod"; done
sshd_pids() {  # every mpi-sshd process of pod $1
  local pid
  for pid in $(ip netns pids "$("$CIB" ns "$1")"); do
    [[ $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) == */mpi-sshd* ]] && echo "$pid"
  done
}
# Their memory as the proportional set size: a connection process is forked from the
# listener, and the pages they share would count once in each one's VmRSS.
sshd_rss_kb() { local kb=0 pid; for pid in $(sshd_pids "$1"); do
  kb=$((kb + $(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0))); done; echo "$kb"; }

# A clean start: no descriptor but 0, 1 and 2; HOME as the working folder.
# (The shell's own descriptors, listed by ls straight to the channel: a $(...) would add its pipe.)
out=$(in_pod "$launcher" ssh "$node" 'ls /proc/$$/fd; echo; pwd; echo "$HOME"')
expect_eq "$(sed '/^$/,$d' <<<"$out" | paste -sd ' ')" "0 1 2" "the command's open descriptors"
expect_eq "$(sed '1,/^$/d' <<<"$out" | sed -n 1p)" "$(sed -n '$p' <<<"$out")" "the command's working folder, HOME"
out=$(in_pod "$launcher" ssh "$bare" 'pwd' 2>"$CIB_DIR/err")
expect_eq "$out" "/" "the working folder where HOME cannot be entered"
expect_eq "$(cat "$CIB_DIR/err")" "Could not chdir to home directory $CIB_DIR/no-such-home: No such file or directory" \
  "what the command says then"
# Nor does any process of the server keep them: a session process's sandbox refuses new files
# and sockets, not one it inherited.
for pid in $(sshd_pids "${nodes[0]}"); do
  ! ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -- "-> $CIB_DIR/inherited" ||
    fail "mpi-sshd process $pid kept the descriptor it inherited: $(ls -l "/proc/$pid/fd")"
done
pass "a command starts clean: descriptors 0, 1, 2 only (the server was started with 3 and 7, and kept neither), in HOME, else / as sshd"

# Copies both ways, each compared byte for byte: an odd size, every byte value.
mkdir -p "$CIB_DIR/xfer"; head -c 3000001 /dev/urandom >"$CIB_DIR/xfer/data"
dest="$CIB_DIR/xfer"
same() { cmp "$CIB_DIR/xfer/data" "$1" || fail "$2: $1 differs from what was sent"; }
in_pod "$launcher" scp -q "$dest/data" "$node:$dest/by-scp" || fail "scp (SFTP) to $node"
in_pod "$launcher" scp -q "$node:$dest/by-scp" "$dest/back-scp" || fail "scp (SFTP) from $node"
same "$dest/by-scp" "scp's copy"; same "$dest/back-scp" "scp's copy back"
expect_contains "$(cat "$log")" "subsystem sftp (" "scp over SFTP in the log"
in_pod "$launcher" scp -q -O "$dest/data" "$node:$dest/by-scp-O" || fail "scp -O to $node"
in_pod "$launcher" scp -q -O "$node:$dest/by-scp-O" "$dest/back-scp-O" || fail "scp -O from $node"
same "$dest/by-scp-O" "scp -O's copy"; same "$dest/back-scp-O" "scp -O's copy back"
printf 'put %s %s\nget %s %s\nls -l %s\n' "$dest/data" "$dest/by-sftp" "$dest/by-sftp" "$dest/back-sftp" "$dest" \
  >"$CIB_DIR/batch"
out=$(in_pod "$launcher" sftp -b "$CIB_DIR/batch" "$node" 2>&1) || fail "sftp's batch: $out"
same "$dest/by-sftp" "sftp's put"; same "$dest/back-sftp" "sftp's get"
expect_contains "$out" "3000001" "sftp's ls -l"
in_pod "$launcher" rsync -a "$dest/data" "$node:$dest/by-rsync" || fail "rsync to $node"
in_pod "$launcher" rsync -a "$node:$dest/by-rsync" "$dest/back-rsync" || fail "rsync from $node"
same "$dest/by-rsync" "rsync's copy"; same "$dest/back-rsync" "rsync's copy back"
pass "scp (SFTP), scp -O, sftp (put, get, ls) and rsync through mpi-sshd, byte for byte both ways"

# No sftp-server: refused by name, in the log and to the person, who is told what works.
rc=0; in_pod "$launcher" scp "$dest/data" "$bare:$dest/refused" 2>"$CIB_DIR/err" || rc=$?
((rc != 0)) || fail "scp over SFTP succeeded where the image has no sftp-server"
expect_contains "$(cat "$CIB_DIR/err")" "no sftp-server in this image" "what scp's user reads"
expect_contains "$(cat "$CIB_DIR/err")" "scp -O copies over the scp protocol instead" "what works, told"
expect_contains "$(cat "$bare_log")" 'subsystem "sftp" refused: no sftp-server in this image' "the refusal in the log"
in_pod "$launcher" scp -q -O "$dest/data" "$bare:$dest/by-scp-O-bare" || fail "scp -O where there is no sftp-server"
same "$dest/by-scp-O-bare" "scp -O's copy where there is no sftp-server"
rc=0; in_pod "$launcher" ssh -s "$node" netconf </dev/null 2>/dev/null || rc=$?
((rc != 0)) || fail "the subsystem netconf was served"
expect_contains "$(cat "$log")" 'subsystem "netconf" refused: mpi-sshd serves only sftp' "another subsystem"
pass "no sftp-server: sftp refused by name, scp -O named and working; another subsystem refused by name"

# Memory: each client below runs for a while; the server's resident memory is sampled
# meanwhile, and another session must answer.
key=$(ls "$CIB_DIR/pods/$launcher/home/.ssh" | grep -E '^id_[a-z0-9]+$' | head -n 1)
key="$CIB_DIR/pods/$launcher/home/.ssh/$key"
base_kb=$(sshd_rss_kb "${nodes[0]}")
# peak_while SECONDS: the largest resident memory seen, and another session's answer.
peak_while() {
  local peak=0 kb end=$((SECONDS + $1)) answer
  while ((SECONDS < end)); do kb=$(sshd_rss_kb "${nodes[0]}"); ((kb > peak)) && peak=$kb; sleep 0.1; done
  answer=$(in_pod "$launcher" timeout 10 ssh "$node" 'echo alive') || answer="no answer"
  expect_eq "$answer" "alive" "another session while $2"
  ((peak - base_kb < 32 * 1024)) ||
    fail "mpi-sshd's memory grew by $(((peak - base_kb) / 1024)) MB (from $((base_kb / 1024)) MB) while $2"
  echo "$(((peak - base_kb) / 1024))"
}
# in_node_pod CMDLINE: whether a process of the first node's pod runs exactly CMDLINE.
in_node_pod() { local pid; for pid in $(ip netns pids "$("$CIB" ns "${nodes[0]}")"); do
  [[ $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) == "$1 " ]] && return 0; done; return 1; }
# (1) Within the window, as fast as the server takes it, to a command that reads 64 KiB at a time.
(exec "$CIB" exec "$launcher" -- ssh "$node" 'python3 -c "import sys, time
while sys.stdin.buffer.read1(65536): time.sleep(0.01)"') </dev/zero 2>"$CIB_DIR/fast.err" &
fast=$!
grew=$(peak_while 4 "a client fills its window to a slow reader")
kill "$fast" 2>/dev/null ||
  fail "the client within its window was cut off: $(cat "$CIB_DIR/fast.err"; grep -F 'closed:' "$log")"
wait "$fast" 2>/dev/null || true
pass "a client within its window, to a slow reader: the server grew by $grew MB"
# (2) Beyond the window, to a command that never reads: the connection is closed.
(exec "$CIB" exec "$launcher" -- /usr/bin/python3 "$here/window_client.py" beyond-window "$node" 2222 "$key") \
  >"$CIB_DIR/beyond.out" 2>&1 &
beyond=$!
grew=$(peak_while 4 "a client sends beyond the window")
wait "$beyond" || fail "the client beyond its window: $(cat "$CIB_DIR/beyond.out")"
said=$(cat "$CIB_DIR/beyond.out")
[[ $said == "closed after "* ]] || fail "a client beyond its window was not closed: $said"
expect_contains "$(cat "$log")" "closed: the client ignored the channel's window" "the close in the log"
pass "a client beyond its window: the connection $said, the server grew by $grew MB"
# (3) A 2 GiB window, then the client stops reading while the command writes without end.
(exec "$CIB" exec "$launcher" -- /usr/bin/python3 "$here/window_client.py" stalled "$node" 2222 "$key") \
  >"$CIB_DIR/stalled.out" 2>&1 &
stalled=$!
wait_for "reading stopped" "$CIB_DIR/stalled.out" 30
in_node_pod "cat /dev/zero" || fail "the stalled client's command is not running"
grew=$(peak_while 4 "a client stops reading a 2 GiB window")
kill -KILL "$stalled"; wait "$stalled" 2>/dev/null || true
pass "a client that stops reading a 2 GiB window: the server grew by $grew MB"
# Their commands end with their connections (the slow reader's, the sleep, the cat).
for _ in $(seq 100); do
  in_node_pod "cat /dev/zero" || in_node_pod "sleep 60" || in_node_pod "python3 -c import sys, time
while sys.stdin.buffer.read1(65536): time.sleep(0.01)" || break
  sleep 0.1
done
! in_node_pod "cat /dev/zero" && ! in_node_pod "sleep 60" || fail "a command outlived its client's connection"
pass "every command of those clients ended with its connection"

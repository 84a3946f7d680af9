#!/usr/bin/env bash
# mpi-rank, the lean rank agent, as MPI runs it: it loads no shared library but libc (so it
# starts fast and runs inside other images), sets the torch variables, passes on the
# rank's stderr, exit code and signals, and runs without a coordinator or a job key.
set -euo pipefail
A="$TMPI_BUILD_DIR/bin/mpi-rank"
fail() { echo "FAIL: $*" >&2; exit 1; }
if [[ ${TMPI_SANITIZED:-OFF} != ON ]]; then  # sanitizer builds link their runtimes
  libs=$(ldd "$A" | awk '{ print $1 }' | grep -vE '^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|/lib64/ld-linux-x86-64\.so\.2)$' || true)
  [[ -z $libs ]] || fail "mpi-rank loads more than libc: $libs"
fi
home=$(mktemp -d); trap 'rm -rf "$home"' EXIT
export HOME=$home OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_RANK=1 \
  OMPI_COMM_WORLD_LOCAL_SIZE=2 TMPI_SLOT_LAYOUT=2x4 TMPI_MASTER_ADDR=job-node-0-0.job
out=$("$A" -- sh -c 'echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR"')
[[ $out == "RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 NODE_RANK=2 MASTER_ADDR=job-node-0-0.job" ]] || fail "torch variables: $out"
rc=0; err=$("$A" -- sh -c 'echo oops >&2; exit 7' 2>&1 >/dev/null) || rc=$?
[[ $rc == 7 && $err == oops ]] || fail "expected the rank's exit code 7 and its stderr, got $rc: $err"
# SIGTERM to the agent reaches the rank, whose own exit code comes back.
ready=$home/ready
"$A" -- sh -c "trap 'echo got TERM; exit 9' TERM; touch $ready; while :; do sleep 0.1; done" > "$home/out" &
agent=$!
for _ in $(seq 100); do [[ -e $ready ]] && break; sleep 0.1; done
kill -TERM "$agent"
timeout 20 tail --pid="$agent" -f /dev/null || kill -KILL "$agent"  # a lost signal fails, not hangs
rc=0; wait "$agent" || rc=$?
[[ $rc == 9 && $(cat "$home/out") == "got TERM" ]] || fail "SIGTERM forwarding: rc $rc: $(cat "$home/out")"
rc=0; out=$(env -u OMPI_COMM_WORLD_RANK "$A" -- true 2>&1) || rc=$?
[[ $rc == 64 && $out == *"no MPI rank in the environment"* ]] || fail "outside MPI: rc $rc: $out"
# The tail of stderr kept for the report is bounded in bytes: 16 MB of progress frames
# redrawn with '\r' (no newline) must not grow the agent (it held them all: 19 MB of RSS).
if [[ ${TMPI_SANITIZED:-OFF} != ON ]]; then  # a sanitizer's shadow memory would blur the measure
  t0=$(date +%s%N)
  "$A" -- python3 -c '
import sys, time
frame = ("\r" + "#" * 1000).encode()
for _ in range(16000): sys.stderr.buffer.write(frame)
sys.stderr.flush()
open(sys.argv[1], "w").close()
time.sleep(3)
sys.exit(3)' "$home/written" 2>/dev/null &
  agent=$!
  for _ in $(seq 200); do [[ -e $home/written ]] && break; sleep 0.1; done
  drained_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  sleep 0.5  # the agent drains what is still in the pipe
  peak=$(awk '/^VmHWM:/ { print $2 }' "/proc/$agent/status")
  rc=0; wait "$agent" || rc=$?
  [[ $rc == 3 ]] || fail "the rank's exit 3 after 16 MB of stderr: got $rc"
  [[ $peak =~ ^[0-9]+$ && $peak -lt 8000 ]] || fail "16 MB of '\r' frames on stderr: the agent's peak RSS was ${peak} KB"
  printf 'fault-row\t%s\t%s\t%s\n' "a log bomb (16 MB of stderr frames from a rank)" \
    "the rank's own exit passes; the agent's memory stays bounded (peak ${peak} KB)" "16 MB through the agent in $drained_ms ms"
fi
# Under the launcher (TMPI_COORDINATOR set) but with no job key where it looks, an agent
# says that its rank cannot be reported, and how to fix it, instead of dropping it silently.
rc=0; err=$(TMPI_COORDINATOR=127.0.0.1:9 TMPI_SSH_DIR="$home/no-such-dir" "$A" -- sh -c 'exit 4' 2>&1) || rc=$?
[[ $rc == 4 && $err == *"cannot report to the launcher at 127.0.0.1:9"*"TMPI_SSH_DIR"* ]] ||
  fail "an agent without the job key: expected exit 4 and a warning, got $rc: $err"
# The launcher's folder first, then the default one: a node that keeps the key in ~/.ssh reports.
mkdir -p "$home/.ssh" && chmod 700 "$home/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$home/.ssh/id_ed25519"
rc=0; err=$(TMPI_COORDINATOR=127.0.0.1:9 TMPI_SSH_DIR="$home/no-such-dir" "$A" -- sh -c 'exit 4' 2>&1) || rc=$?
[[ $rc == 4 && $err != *"cannot report"* ]] || fail "the key in ~/.ssh was not found after TMPI_SSH_DIR: $rc: $err"
# The failure report carries the stderr tail within the coordinator's 64 KiB body limit,
# however the lines escape in JSON: 20 lines of 1 KiB of escape bytes (6 JSON bytes each)
# were 120 KiB, and the coordinator refused the report. A stand-in coordinator takes it.
python3 - "$home/body" "$home/port" <<'PY' &
import http.server, sys
class Take(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/rank" and b'"exit"' in body:
            open(sys.argv[1], "wb").write(body)
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *args): pass
server = http.server.HTTPServer(("127.0.0.1", 0), Take)
open(sys.argv[2], "w").write(str(server.server_port))
server.timeout = 20
server.handle_request(); server.handle_request()
PY
taker=$!
for _ in $(seq 100); do [[ -s $home/port ]] && break; sleep 0.1; done
rc=0; TMPI_COORDINATOR="127.0.0.1:$(cat "$home/port")" "$A" -- python3 -c '
import sys
for _ in range(19): sys.stderr.buffer.write(b"\x1b" * 1024 + b"\n")
sys.stderr.buffer.write(b"crlf last line\r\n")
sys.exit(3)' 2>/dev/null || rc=$?
for _ in $(seq 100); do [[ -s $home/body ]] && break; sleep 0.1; done
kill "$taker" 2>/dev/null || true; wait "$taker" 2>/dev/null || true
[[ $rc == 3 && -s $home/body ]] || fail "no exit report from a rank that exited 3 (rc $rc)"
size=$(stat -c %s "$home/body")
((size < 65536)) || fail "the exit report is $size bytes, over the coordinator's 64 KiB body limit"
jq -e '(.tail | split("\n") | map(select(length > 0)) | length) == 20 and (.tail | contains("..."))' "$home/body" >/dev/null ||
  fail "the report's tail is not the 20 lines, each cut: $(head -c 300 "$home/body")"
# A line ended by "\r\n" is kept as it is; before, its '\r' emptied it.
jq -e '.tail | endswith("crlf last line\n")' "$home/body" >/dev/null ||
  fail "a line ended by CRLF was lost from the tail: $(jq -c '.tail[-80:]' "$home/body")"
# An agent cut off from the coordinator that had answered it (a partition, or the launcher
# gone) ends its rank after --lost-after and one beat more, and exits 75: nobody else can stop
# it. What the rank started ends with it (here a `sleep 3017` in the background, as a wrapper
# script's python), though the rank's end leaves it an orphan; its output goes elsewhere, so
# that one left running fails the check below rather than holding this script's pipe. A
# stand-in coordinator takes the start report, then is gone.
# Its answer is signed as the coordinator signs one (rendezvous/protocol.h): over the
# request's nonce, with the key derived from the job key; the agent takes no other.
start_taker() {
  rm -f "$home/port"
  python3 - "$home/port" "$home/.ssh/id_ed25519" <<'PY' &
import hashlib, hmac, http.server, json, sys
job_key = "".join(open(sys.argv[2]).read().split())
key = hmac.new(job_key.encode(), b"trainer-mpi rendezvous v1", hashlib.sha256).digest()
class Take(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = {"jobEnded": False}
        text = "answer:%s|200|%s|%s" % (self.path[len("/v1/"):], request.get("nonce", ""),
                                        json.dumps(answer, separators=(",", ":"), sort_keys=True))
        answer["proof"] = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        out = json.dumps(answer).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *args): pass
server = http.server.HTTPServer(("127.0.0.1", 0), Take)
open(sys.argv[1], "w").write(str(server.server_port))
server.timeout = 20
server.handle_request()
PY
  taker=$!
  for _ in $(seq 100); do [[ -s $home/port ]] && break; sleep 0.1; done
}
start_taker
t0=$(date +%s.%N)
rc=0; err=$(TMPI_COORDINATOR="127.0.0.1:$(cat "$home/port")" TMPI_LOST_AFTER=2s TMPI_BEAT_INTERVAL=500ms \
              timeout 40 "$A" -- sh -c 'sleep 3017 >/dev/null 2>&1 & exec sleep 30' 2>&1) || rc=$?
took=$(bc <<<"$(date +%s.%N) - $t0")
wait "$taker" 2>/dev/null || true
left=$(pgrep -f "sleep 3017" || true)
[[ -z $left ]] || { pkill -f "sleep 3017"; fail "what the cut-off rank started outlived it: pid $left"; }
[[ $rc == 75 && $err == *"has not answered for 2 s (lost-after 2 s)"*"ending this rank"* ]] ||
  fail "an agent cut off from its coordinator: expected exit 75 and why, got $rc after $took s: $err"
(( $(bc <<<"$took < 10") )) || fail "the cut-off agent ended its rank only after $took s (start 2 s + lost-after 2 s + a beat)"
# Its MPI daemon is told to go too (SIGTERM), and killed 5 s later if it is still there. The
# stand-in daemon is named orted and only notes a SIGTERM (bash runs the trap once its
# foreground child, the agent, has exited: it never does).
printf '%s\n' '#!/bin/bash' "trap 'echo orted: got TERM >&2' TERM" '"$@"' 'echo "orted: the agent exited $?" >&2' > "$home/orted"
chmod +x "$home/orted"
start_taker
rc=0; err=$(TMPI_COORDINATOR="127.0.0.1:$(cat "$home/port")" TMPI_LOST_AFTER=2s TMPI_BEAT_INTERVAL=500ms \
              timeout 40 "$home/orted" "$A" -- sleep 30 2>&1) || rc=$?
wait "$taker" 2>/dev/null || true
[[ $rc == 137 && $err == *"ending this rank"*"the MPI daemon orted (pid "*") did not end 5 s after SIGTERM: killing it"* &&
   $err != *"orted: the agent exited"* ]] ||
  fail "a daemon that stays after SIGTERM: expected it killed (137), got $rc: $err"
# One that never reached it is not cut off (the coordinator never counted it): its rank runs.
rc=0; err=$(TMPI_COORDINATOR=127.0.0.1:9 TMPI_LOST_AFTER=1s TMPI_BEAT_INTERVAL=200ms "$A" -- sleep 4 2>&1) || rc=$?
[[ $rc == 0 && $err != *"ending this rank"* ]] || fail "an agent that never reached its coordinator ended its rank: $rc: $err"
rm -rf "$home/.ssh"
# A rank that cannot be started (fork fails: the process limit) is a failure, never exit 0.
# RLIMIT_NPROC binds a non-root uid; with a limit of 1, the agent itself is that one process.
# The limit counts the uid's processes everywhere: 4377 is this test's alone (the unit test
# Process.AForkThatFailsIsAnErrorAndSignalsNobody takes 4343, and ctest -j runs them at once).
if [[ $(id -u) == 0 ]]; then
  # (LeakSanitizer's check at exit needs a thread of its own, which the same limit forbids.)
  rc=0; out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
                prlimit --nproc=1 setpriv --reuid 4377 --regid 4377 --clear-groups "$A" -- true 2>&1) || rc=$?
  [[ $rc == 71 && $out == *"cannot start the rank: fork:"* ]] || fail "a fork that fails: expected exit 71 (system) and why, got $rc: $out"
fi
echo "ok: mpi-rank loads only libc, sets the torch variables, passes on stderr, exit 7 and SIGTERM, refuses to run outside MPI, reports a tail within the body limit, ends its rank when cut off from the coordinator (75) and then its MPI daemon (SIGKILL 5 s after SIGTERM), and fails (71) when it cannot fork"

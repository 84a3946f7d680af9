#!/usr/bin/env bash
# mpi-launcher run leaves report.json on every way out, those before any host is waited
# for too: a hosts.json that cannot be read, and the coordinator's port
# already taken. Each exits with its documented code, at once (no hang on a coordinator
# that never started), and report.json holds that code, the launcher's side and the reason.
set -euo pipefail
: "${TMPI_BUILD_DIR:?set by ctest: the build folder}"
fail() { echo "FAIL: $*" >&2; exit 1; }
L="$TMPI_BUILD_DIR/bin/mpi-launcher"
work=$(mktemp -d)
holder=""
trap '[[ -n $holder ]] && kill "$holder" 2>/dev/null; rm -rf "$work"' EXIT
# The exit of report.json agrees with the process's, and names the reason.
check_report() {  # check_report FILE RC WORDS
  [[ -s $1 ]] || fail "no report.json after exit $2"
  jq -e --argjson rc "$2" --arg words "$3" \
    '.exit.code == $rc and .exit.side == "launcher" and (.exit.reason | contains($words)) and (.ranks == [])
     and (.exit.seconds >= 0)' \
    "$1" >/dev/null || fail "report.json after exit $2 does not say it ($3): $(jq -c .exit "$1")"
}

rc=0; out=$(timeout 20 "$L" run --hosts "$work/no-such/hosts.json" --report "$work/r1.json" -- true 2>&1) || rc=$?
[[ $rc != 0 && $rc != 124 ]] || fail "a missing hosts.json: exit $rc: $out"
check_report "$work/r1.json" "$rc" "hosts.json"

# A job that can be set up, whose coordinator cannot listen: the port is held.
"$TMPI_BUILD_DIR/bin/mpi-init" --jobset rt --replicated-jobs launcher=1,node=1 --out "$work/etc" \
  --ssh-dir "$work/ssh" >/dev/null
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen()
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(60)' "$work/port" &
holder=$!
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")
rc=0; out=$(timeout 20 "$L" run --hosts "$work/etc/hosts.json" --ssh-dir "$work/ssh" --mpi openmpi \
              --rendezvous-port "$port" --report "$work/r2.json" -- true 2>&1) || rc=$?
[[ $rc != 0 && $rc != 124 ]] || fail "the coordinator's port taken: exit $rc (124: it hung): $out"
check_report "$work/r2.json" "$rc" "$port"
echo "ok: report.json on a missing hosts.json (exit $(jq .exit.code "$work/r1.json")) and on a taken port (exit $rc)"

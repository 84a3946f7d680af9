#!/usr/bin/env bash
# A user's first commands, as the README gives them, before any job runs (no root, no
# cluster needed):
#   - `--version` on every program (mpi-ssh and mpi-ssh-client too: ssh's own is -V) prints its
#     name and the project's version, exit 0 (a
#     version is what a bug report asks for first; it was an unknown subcommand);
#   - each subcommand's --help shows its own options (convert's, rank's: not run's);
#   - `mpi-launcher hosts` with no coordinator answering shows the health table the README
#     promises, every host of hosts.json on its row, not yet heard from (not the raw file).
set -euo pipefail
: "${TMPI_BUILD_DIR:?set by ctest: the build folder}"
: "${TMPI_VERSION:?set by ctest: the project version}"
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for program in mpi-launcher mpi-init mpi-rendezvous mpi-rank nccl-check mpi-sshd mpi-ssh mpi-ssh-client; do
  rc=0; out=$("$TMPI_BUILD_DIR/bin/$program" --version 2>&1) || rc=$?
  [[ $rc == 0 && $out == "$program $TMPI_VERSION" ]] || fail "$program --version: exit $rc: $out"
done

# Help that fits the command: convert's and rank's own options, not run's 50.
convert_help=$("$TMPI_BUILD_DIR/bin/mpi-launcher" convert --help)
[[ $convert_help == *"--runtime NAME"* && $convert_help == *"--output FILE"* && $convert_help != *"--hosts"* ]] ||
  fail "convert --help: $convert_help"
run_help=$("$TMPI_BUILD_DIR/bin/mpi-launcher" run --help)
[[ $run_help == *"--hosts FILE"* && $run_help != *"--runtime NAME  "* ]] || fail "run --help shows convert's options"
rank_help=$("$TMPI_BUILD_DIR/bin/mpi-launcher" rank --help)
[[ $rank_help == *"--coordinator"* && $rank_help != *"--hosts"* ]] || fail "rank --help: $rank_help"

"$TMPI_BUILD_DIR/bin/mpi-init" --jobset first --replicated-jobs launcher=1,node=2 --slots 2 --out "$work/etc" \
  --ssh-dir "$work/ssh" >/dev/null
# A port where nothing listens: the one a socket just held and let go.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rc=0; out=$("$TMPI_BUILD_DIR/bin/mpi-launcher" hosts --hosts "$work/etc/hosts.json" --rendezvous-port "$port" 2>&1) ||
  rc=$?
[[ $rc == 0 ]] || fail "hosts without a job: exit $rc: $out"
[[ $out != *'"hosts"'* && $out != *'{'* ]] || fail "hosts without a job printed the raw hosts.json: $out"
# The hosts that run ranks: the two node pods (the launcher runs none here).
rows=$(jq -r '.hosts[].name' "$work/etc/hosts.json")
[[ $(wc -l <<<"$rows") == 2 ]] || fail "hosts.json: $(cat "$work/etc/hosts.json")"
grep -q "^barrier not-started: 0/2 hosts ready$" <<<"$out" || fail "no table header for 2 hosts: $out"
for name in $rows; do
  grep -Eq "^$name +waiting +.*not yet heard from$" <<<"$out" || fail "host $name is not on its row: $out"
done
# A boolean flag is bare or --flag=VALUE: `--dry-run false` would read two ways, so it is refused
# with the fix; `--dry-run=false` is a real run (here: no hosts file, 74, the dry run's 0 never).
rc=0; out=$("$TMPI_BUILD_DIR/bin/mpi-launcher" run --dry-run false -- true 2>&1) || rc=$?
[[ $rc == 64 && $out == *"write --dry-run=false (--dry-run alone is true)"* ]] || fail "--dry-run false: exit $rc: $out"
rc=0; out=$("$TMPI_BUILD_DIR/bin/mpi-launcher" run --dry-run=maybe -- true 2>&1) || rc=$?
[[ $rc == 64 && $out == *"--dry-run: 'maybe' is not a boolean"* ]] || fail "--dry-run=maybe: exit $rc: $out"
rc=0; out=$("$TMPI_BUILD_DIR/bin/mpi-launcher" run --dry-run --hosts "$work/etc/hosts.json" --ssh-dir "$work/ssh" -- true 2>&1) || rc=$?
[[ $rc == 0 && $out == *"true"* ]] || fail "a bare --dry-run: exit $rc: $out"
[[ $run_help == *"--dry-run[=BOOL]"* ]] || fail "run --help does not show --dry-run[=BOOL]"
echo "ok: --version on every program; hosts without a job: the table, 2 hosts not yet heard from; boolean flags"

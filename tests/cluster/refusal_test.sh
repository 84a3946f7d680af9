#!/usr/bin/env bash
# cib refuses, with a clear message and exit 2, to run where it lacks root.
set -euo pipefail
cib="$(cd "$(dirname "$0")" && pwd)/cib"
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$cib" run --nodes 1 -- true 2>&1) && rc=0 || rc=$?
[[ $rc == 2 ]] || { echo "FAIL: expected exit 2 without root, got $rc: $out" >&2; exit 1; }
grep -q "needs root" <<<"$out" || { echo "FAIL: no clear message: $out" >&2; exit 1; }
echo "ok: refused without root: $out"

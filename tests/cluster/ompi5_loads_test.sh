#!/usr/bin/env bash
# Every program of the build's bin/ loads inside the Debian 13 root of the Open MPI 5
# tests: root_libs.sh brings what the root lacks from each program's real dependency
# closure, then checks every library and symbol with `ldd -r` inside the root. A program
# that gains a dependency the root lacks fails here by name, not in the middle of a job.
set -euo pipefail
: "${TMPI_BUILD_DIR:?set by ctest: the build folder}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(bash "$here/ompi5_root.sh")
programs=("$TMPI_BUILD_DIR"/bin/*)
[[ ${#programs[@]} -ge 5 ]] || { echo "FAIL: expected the programs in $TMPI_BUILD_DIR/bin, found: ${programs[*]}" >&2; exit 1; }
bash "$here/root_libs.sh" "$root" "$TMPI_BUILD_DIR/ompi5-libs-check" "${programs[@]}" >/dev/null
echo "ok: ${#programs[@]} programs load inside the Open MPI 5 root: ${programs[*]##*/}"

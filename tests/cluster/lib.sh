# lib.sh: helpers for cluster-in-a-box tests. Sourced by each test script, which runs
# under `cib run`, so CIB_DIR names a live cluster. A failed check ends the test non-zero.
set -euo pipefail
CIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cib"
: "${TMPI_BUILD_DIR:?set by ctest: the build folder with the project binaries}"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
in_pod() { local pod=$1; shift; "$CIB" exec "$pod" -- "$@"; }
pods() { "$CIB" pods | awk '{ print $1 }'; }
node_pods() { pods | grep -- '-node-'; }
launcher_pod() { pods | grep -- '-launcher-' | head -n 1; }
subdomain() { cat "$CIB_DIR/subdomain"; }

# expect_contains TEXT NEEDLE WHAT
expect_contains() { grep -qF -- "$2" <<<"$1" || fail "$3: expected '$2' in:"$'\n'"$1"; }
expect_eq() { [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"; }

# Open MPI refuses root unless told; the Trainer images set the same two variables.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

#!/usr/bin/env bash
# root_libs.sh ROOT OUT BINARY...: makes our binaries (built on Debian 12) load inside a
# foreign root (the Debian 13 root of the Open MPI 5 tests), and proves that they do.
#
# - Which libraries: each binary's real dependency closure, as this machine's loader
#   resolves it (ldd). No hand-written list: a new dependency is picked up by itself.
# - Which of them to bring: those whose soname the root's own loader cache does not know.
#   A soname the root has is ABI-compatible by definition and is used from the root. The
#   others are copied from this machine into OUT (a folder of the build tree, made anew),
#   never into the root, which stays as it was made and verified (ompi5_root.sh).
# - The proof: inside the root (a private mount namespace with the build tree bound in),
#   `ldd -r` of each binary, with OUT on LD_LIBRARY_PATH, must find every library and
#   every symbol. Any "not found" or "undefined symbol" fails, naming the binary.
# Prints OUT, the LD_LIBRARY_PATH that the programs need inside the root.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: root_libs.sh ROOT OUT BINARY..." >&2; exit 2; }
root=$1 out=$2; shift 2
binaries=("$@")
for bin in "${binaries[@]}"; do
  [[ -x $bin ]] || { echo "root_libs: $bin is not an executable: build first" >&2; exit 2; }
done

rm -rf "$out"; mkdir -p "$out"
in_root=$(chroot "$root" /sbin/ldconfig -p | awk '/ => / { print $1 }' | sort -u)
declare -A copied=()
for bin in "${binaries[@]}"; do
  # "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)": the closure, flat.
  while read -r soname path; do
    [[ -n ${copied[$soname]:-} ]] && continue
    grep -qxF -- "$soname" <<<"$in_root" && continue
    cp -L "$path" "$out/$soname"
    copied[$soname]=$path
  done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done
echo "root_libs: brought ${#copied[@]} libraries the root lacks: ${!copied[*]}" >&2

# The proof, inside the root: every binary, every library, every symbol.
dirs=("$out")
for bin in "${binaries[@]}"; do dirs+=("$(dirname "$(readlink -f "$bin")")"); done
report=$(unshare --mount --propagation private bash -c '
  root=$1 out=$2; shift 2
  for dir in $(printf "%s\n" "$@" | sort -u); do
    mkdir -p "$root$dir"; mount --bind "$dir" "$root$dir"
  done
  while read -r bin; do
    echo "== $bin"
    chroot "$root" env LD_LIBRARY_PATH="$out" ldd -r "$bin" 2>&1 || echo "ldd failed"
  done
' _ "$root" "$out" "${dirs[@]}" < <(for bin in "${binaries[@]}"; do readlink -f "$bin"; done))
bad=$(awk '/^== / { bin = $2 } /not found|undefined symbol|ldd failed/ { print bin ": " $0 }' <<<"$report")
if [[ -n $bad ]]; then
  echo "root_libs: these binaries do not load inside $root:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "root_libs: ${#binaries[@]} binaries load inside $root" >&2
echo "$out"

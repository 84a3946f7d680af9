#!/usr/bin/env bash
# The house style, checked: every C++ file the project tracks must be as the tree's
# .clang-format writes it, and the programs' sources (not tests/ or bench/) must pass the
# checks of the tree's .clang-tidy, every warning an error. Run by scripts/test.sh beside the
# dev preset's tests.
#
# clang-tidy reads each file's own compile command. The dev build compiles in unity batches
# (CMakePresets.json), whose commands name the batches, not the files; so the commands come
# from a tree of the dev preset configured without them, which builds nothing (2 seconds).
#
#   scripts/check_style.sh [TIDY_DIR]         TIDY_DIR: build/tidy, configured here
#   scripts/check_style.sh --fix-format       rewrites the files instead of failing
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --fix-format ]]; then
  git ls-files -z '*.cpp' '*.h' | xargs -0 clang-format -i
  exit 0
fi
build=${1:-build/tidy}
cmake --preset dev -B "$build" -DCMAKE_UNITY_BUILD=OFF >/dev/null ||
  { echo "check_style: configuring $build (the dev preset without unity batches) failed" >&2; exit 2; }
failed=0

# clang-format: the names of the files that differ, then one diff each, so the fix is plain.
mapfile -t unformatted < <(git ls-files -z '*.cpp' '*.h' | xargs -0 -n 20 clang-format --dry-run 2>&1 \
  | sed -nE 's/^([^:]+):[0-9]+:[0-9]+: (warning|error): code should be clang-formatted.*/\1/p' | sort -u)
if ((${#unformatted[@]} > 0)); then
  echo "check_style: ${#unformatted[@]} file(s) differ from .clang-format (fix: bash scripts/check_style.sh --fix-format):"
  for file in "${unformatted[@]}"; do
    echo "--- $file"
    diff -u "$file" <(clang-format "$file") | tail -n +3 | head -n 40
  done
  failed=1
else
  echo "check_style: format: every tracked C++ file is as .clang-format writes it"
fi

# clang-tidy: the dev build compiles with GCC, whose warning flags clang does not know.
mapfile -t sources < <(git ls-files 'common/*.cpp' 'initcontainer/*.cpp' 'rendezvous/*.cpp' 'launcher/*.cpp' 'agent/*.cpp' 'ssh/*.cpp' 'nodessh/*.cpp' \
  'status/*.cpp' 'ncclcheck/*.cpp')
out=$(mktemp); trap 'rm -f "$out"' EXIT
printf '%s\n' "${sources[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet \
  --extra-arg=-Wno-unknown-warning-option >"$out" 2>&1
if grep -qE '(warning|error): .*\[[a-z0-9.,-]+\]$' "$out"; then
  echo "check_style: clang-tidy found, in ${#sources[@]} files:"
  grep -E '(warning|error): .*\[[a-z0-9.,-]+\]$' -A3 "$out" | head -n 200
  failed=1
else
  echo "check_style: tidy: ${#sources[@]} files pass .clang-tidy's checks"
fi
exit $failed

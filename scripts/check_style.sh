#!/usr/bin/env bash
# The house style, checked: every C++ file the project tracks must be as the tree's
# .clang-format writes it, and the programs' sources (not tests/ or bench/) must pass the
# checks of the tree's .clang-tidy, every warning an error. Run by scripts/test.sh after the
# dev build, whose compile_commands.json clang-tidy reads.
#
#   scripts/check_style.sh [BUILD_DIR]        BUILD_DIR: build/dev
#   scripts/check_style.sh --fix-format       rewrites the files instead of failing
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --fix-format ]]; then
  git ls-files -z '*.cpp' '*.h' | xargs -0 clang-format -i
  exit 0
fi
build=${1:-build/dev}
[[ -f $build/compile_commands.json ]] || { echo "check_style: no $build/compile_commands.json: build the dev preset first" >&2; exit 2; }
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

#!/usr/bin/env bash
# The house style, checked: every C++ file the project tracks must be as the tree's
# .clang-format writes it, and the programs' sources (not tests/ or bench/) must pass the
# checks of the tree's .clang-tidy, every warning an error. Run by scripts/test.sh beside the
# dev preset's tests.
#
# clang-tidy reads the dev preset's unity batches (CMakePresets.json), as the build compiles
# them: each batch's heavy headers are parsed once for its sources, not once per source (a
# third of the time). The batches and their commands come from a tree of the dev preset that
# is configured, not built (2 seconds); scripts/tidy_units.py picks the batches that hold the
# programs' sources. The one diagnostic of a batch's own file, that it #includes .cpp files,
# is the unity build's, not ours, and is not counted.
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
cmake --preset dev -B "$build" >/dev/null ||
  { echo "check_style: configuring $build (the dev preset) failed" >&2; exit 2; }
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

# The shape a newcomer relies on: no program file over 400 lines, a map (ARCHITECTURE.md) of
# at most 100, and no launcher-to-agent variable spelled outside the parameter table and
# agent/contract.h (every other place names it through its handle). Functions over 80 lines
# are clang-tidy's readability-function-size, below.
programs='^(common|initcontainer|rendezvous|launcher|convert|agent|ssh|nodessh|status|ncclcheck|bundle)/[^/]+\.(cpp|h)$'
long=$(git ls-files | grep -E "$programs" | while read -r file; do
  lines=$(wc -l <"$file"); ((lines <= 400)) || echo "$file: $lines lines"; done)
map_lines=$(wc -l <ARCHITECTURE.md)
((map_lines <= 100)) || long+=$'\n'"ARCHITECTURE.md: $map_lines lines (at most 100: a map, the design goes to docs/design.md)"
spelled=$(git ls-files | grep -E "$programs" | grep -vE '^(common/param_table\.cpp|agent/contract\.h)$' |
  xargs grep -nE '"TMPI_[A-Z]' | awk '{ code = $0; sub(/^[^:]*:[0-9]+:/, "", code); sub(/\/\/.*/, "", code)
                                        if (code ~ /"TMPI_[A-Z]/) print }')
if [[ -n $long || -n $spelled ]]; then
  echo "check_style: shape:"
  [[ -z $long ]] || echo "${long#$'\n'} (files stay within 400 lines: split by what the parts do)"
  [[ -z $spelled ]] || echo "$spelled"$'\n'"(a TMPI_ variable is spelled once: common/param_table.cpp or agent/contract.h; use its handle)"
  failed=1
else
  echo "check_style: shape: program files within 400 lines, ARCHITECTURE.md within 100, no stray TMPI_ name"
fi

# clang-tidy: the dev build compiles with GCC, whose warning flags clang does not know.
mapfile -t sources < <(git ls-files 'common/*.cpp' 'initcontainer/*.cpp' 'rendezvous/*.cpp' 'launcher/*.cpp' 'convert/*.cpp' 'agent/*.cpp' 'ssh/*.cpp' 'nodessh/*.cpp' \
  'status/*.cpp' 'ncclcheck/*.cpp' 'bundle/*.cpp')
mapfile -t units < <(python3 scripts/tidy_units.py "$build/compile_commands.json" "${sources[@]}")
((${#units[@]} > 0)) || { echo "check_style: scripts/tidy_units.py found no unit to tidy in $build" >&2; exit 2; }
out=$(mktemp); trap 'rm -f "$out"' EXIT
printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet \
  --extra-arg=-Wno-unknown-warning-option >"$out" 2>&1
# Each finding with the three lines after it (the code and the caret), but for the batches'
# own #include lines.
found=$(awk '/\.clang-tidy:[0-9]+:[0-9]+: error/ { print; next }  # a config clang-tidy cannot read checks nothing
  /(warning|error): .*\[[a-z0-9.,-]+\]$/ {
    unity = ($0 ~ /\/Unity\/unity_[0-9]+_cxx\.cxx:[0-9]+:[0-9]+: (warning|error): suspicious #include of file with .\.cpp. extension/)
    if (!unity) { print; left = 3 } else left = 0
    next
  }
  left > 0 && !/: note: / { print; left-- }' "$out")
if [[ -n $found ]]; then
  echo "check_style: clang-tidy found, in ${#sources[@]} files (${#units[@]} units):"
  head -n 200 <<<"$found"
  failed=1
else
  echo "check_style: tidy: ${#sources[@]} files pass .clang-tidy's checks"
fi
exit $failed

#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the dev (warnings as errors),
# asan and fuzz (libFuzzer, bounded runs) presets, and runs every test of each with ctest;
# after the dev preset, the house style (scripts/check_style.sh: clang-format and clang-tidy).
# Cluster-in-a-box tests need root; they fail, never skip, without it.
#
# Every preset runs to the end, whatever an earlier one did: one red test must not hide
# whole suites. Each preset gets a summary line (passed, failed, the failed tests' names),
# and the run ends with the totals, and exits non-zero if any build or test failed.
#
#   TMPI_TEST_PRESETS="dev"   a quicker run (default: dev asan fuzz)
#   TMPI_FRESH=1              run from nothing: every cache (TMPI_CACHE, normally
#                             /var/cache/tmpi: the Debian 13 root, …) starts empty, in a
#                             folder of this run that is removed at its end, so that no
#                             cache made before decides a result
#   TMPI_CTEST_ARGS="-R x"    passed on to every ctest
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || { echo "test.sh: installing the dependencies failed" >&2; exit 1; }
if [[ ${TMPI_FRESH:-0} == 1 ]]; then
  export TMPI_CACHE=$PWD/build/fresh-cache
  rm -rf "$TMPI_CACHE"; mkdir -p "$TMPI_CACHE"
  trap 'rm -rf "$TMPI_CACHE"' EXIT
  echo "== TMPI_FRESH=1: caches start empty in $TMPI_CACHE"
fi
jobs=$(nproc)
summaries=()
total_passed=0 total_failed=0
for preset in ${TMPI_TEST_PRESETS:-dev asan fuzz}; do
  echo "== $preset: configure and build"
  if ! cmake --preset "$preset" >/dev/null || ! cmake --build --preset "$preset" -j "$jobs"; then
    summaries+=("$preset: the build failed, no test ran")
    total_failed=$((total_failed + 1))
    continue
  fi
  echo "== $preset: ctest"
  # The extended Open MPI 5 tests run our binaries inside a Debian 13 root, where the
  # sanitizer runtimes of this compiler do not exist: they run in the dev preset only.
  extra=()
  [[ $preset == asan ]] && extra=(-LE extended)
  log=build/$preset/ctest-summary.log
  # shellcheck disable=SC2086 # TMPI_CTEST_ARGS is a list of words
  ctest --preset "$preset" -j "$jobs" "${extra[@]}" ${TMPI_CTEST_ARGS:-} 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  # ctest's closing line: "97% tests passed, 3 tests failed out of 142".
  counts=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
  if [[ -z $counts ]]; then
    summaries+=("$preset: ctest ended with status $status and no result line")
    total_failed=$((total_failed + 1))
    continue
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$counts")
  all=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$counts")
  names=$(sed -n '/The following tests FAILED:/,$p' "$log" | sed -nE 's/^[[:space:]]+[0-9]+ - ([^ ]+).*/\1/p' | paste -sd ' ')
  line="$preset: $((all - failed)) of $all tests passed, $failed failed"
  [[ -n $names ]] && line+=" ($names)"
  if [[ $status != 0 && $failed == 0 ]]; then
    line+=", but ctest ended with status $status"
    failed=1
  fi
  summaries+=("$line")
  total_passed=$((total_passed + all - failed))
  total_failed=$((total_failed + failed))
  if [[ $preset == dev ]]; then
    echo "== style: clang-format and clang-tidy"
    if bash scripts/check_style.sh build/dev; then
      summaries+=("style: format and tidy pass")
      total_passed=$((total_passed + 1))
    else
      summaries+=("style: failed (see the check_style lines above)")
      total_failed=$((total_failed + 1))
    fi
  fi
done
echo
echo "== summary"
printf '%s\n' "${summaries[@]}"
echo "total: $total_passed passed, $total_failed failed"
[[ $total_failed == 0 ]]

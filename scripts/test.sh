#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the dev (warnings as errors),
# asan and fuzz (libFuzzer, bounded runs) presets, and runs every test of each with ctest;
# after the dev preset's tests, the house style (scripts/check_style.sh: clang-format and clang-tidy).
# Cluster-in-a-box tests need root; they fail, never skip, without it.
#
# Every preset runs to the end, whatever an earlier one did: one red test must not hide
# whole suites. Each preset gets a summary line (passed, failed, the failed tests' names),
# and the run ends with the totals, and exits non-zero if any build or test failed.
# The fuzz build runs beside the asan tests, at the lowest CPU priority (below, why).
#
#   TMPI_TEST_PRESETS="dev"   a quicker run (default: dev asan fuzz)
#   TMPI_FRESH=1              run from nothing: every cache (TMPI_CACHE, normally
#                             /var/cache/tmpi: the Debian 13 root, …) starts empty, in a
#                             folder of this run that is removed at its end, so that no
#                             cache made before decides a result
#   TMPI_CTEST_ARGS="-R x"    passed on to every ctest
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
bash scripts/install-deps.sh || { echo "test.sh: installing the dependencies failed" >&2; exit 1; }
if [[ ${TMPI_FRESH:-0} == 1 ]]; then
  export TMPI_CACHE=$PWD/build/fresh-cache
  bash scripts/remove_tree.sh "$TMPI_CACHE" && mkdir -p "$TMPI_CACHE" || exit 1
  trap 'bash scripts/remove_tree.sh "$TMPI_CACHE"' EXIT
  echo "== TMPI_FRESH=1: caches start empty in $TMPI_CACHE"
fi
jobs=$(nproc)
summaries=()
total_passed=0 total_failed=0
read -r -a presets <<<"${TMPI_TEST_PRESETS:-dev asan fuzz}"
# The cluster tests that the asan build runs too run there only when this run has both
# (tests/cluster/CMakeLists.txt, TMPI_CLUSTER_ONCE): each once, the sanitized run being the
# stricter. Set at every configure, so that a dev-only run after a full one has them all.
once=OFF
[[ " ${presets[*]} " == *" asan "* ]] && once=ON
build_preset() {  # build_preset PRESET: configure and build it
  local extra=()
  [[ $1 == dev ]] && extra=(-DTMPI_CLUSTER_ONCE="$once")
  cmake --preset "$1" "${extra[@]}" >/dev/null && cmake --build --preset "$1" -j "$jobs"
}
early_pid="" early_preset=""  # a build started beside the tests of the preset before it
for i in "${!presets[@]}"; do
  preset=${presets[i]} next=${presets[i + 1]:-}
  echo "== $preset: configure and build"
  if [[ $early_preset == "$preset" ]]; then
    built=0
    wait "$early_pid" || built=$?
    cat "build/$preset-build.log"
    early_pid="" early_preset=""
  else
    built=0
    build_preset "$preset" || built=$?
  fi
  if [[ $built != 0 ]]; then
    summaries+=("$preset: the build failed, no test ran")
    total_failed=$((total_failed + 1))
    continue
  fi
  # The next preset's build runs beside these tests (not beside dev's, whose fabric and fault
  # rows measure bandwidth and time: a fresh run with the style check beside them was slower
  # and failed a bandwidth floor), at the lowest CPU priority, on what they leave idle; its
  # lines are printed when its turn comes.
  if [[ $preset != dev && -n $next ]]; then
    mkdir -p build
    nice -n 19 bash -c "$(declare -f build_preset); jobs=$jobs once=$once; build_preset $next" >"build/$next-build.log" 2>&1 &
    early_pid=$! early_preset=$next
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
  style_line=""
  if [[ $preset == dev ]]; then
    echo "== style: clang-format and clang-tidy"
    if bash scripts/check_style.sh; then
      style_line="style: format and tidy pass"
      total_passed=$((total_passed + 1))
    else
      style_line="style: failed (see the check_style lines above)"
      total_failed=$((total_failed + 1))
    fi
  fi
  # ctest's closing line: "97% tests passed, 3 tests failed out of 142".
  counts=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
  if [[ -z $counts ]]; then
    summaries+=("$preset: ctest ended with status $status and no result line")
    [[ -n $style_line ]] && summaries+=("$style_line")
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
  [[ -n $style_line ]] && summaries+=("$style_line")
done
echo
echo "== summary"
printf '%s\n' "${summaries[@]}"
echo "total: $total_passed passed, $total_failed failed"
[[ $total_failed == 0 ]]

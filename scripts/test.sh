#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the dev (warnings as errors),
# asan and fuzz (libFuzzer, bounded runs) presets, and runs every test of each with ctest;
# beside the dev preset's tests, the house style (scripts/check_style.sh: clang-format and clang-tidy).
# Cluster-in-a-box tests need root; they fail, never skip, without it.
#
# Every preset runs to the end, whatever an earlier one did: one red test must not hide
# whole suites. Each preset gets a summary line (passed, failed, the failed tests' names),
# and the run ends with the totals, and exits non-zero if any build or test failed.
# Beside the tests, at the lowest CPU priority: the style check (beside dev's) and the next
# preset's build (beside the others'); ctest gets one job more than cores, for the image
# build, which takes none of its "cores" resource (tests/CMakeLists.txt).
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
build_preset() {  # build_preset PRESET: configure and build it
  cmake --preset "$1" >/dev/null && cmake --build --preset "$1" -j "$jobs"
}
read -r -a presets <<<"${TMPI_TEST_PRESETS:-dev asan fuzz}"
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
  # Work that needs no test's result runs beside the tests, at the lowest CPU priority, on
  # what they leave idle: the cluster tests wait on pods, timeouts and the network much of
  # the time. Beside the dev tests the house style (clang-tidy alone took 7 minutes of a
  # fresh run after them); beside the others the next preset's build. Their lines are
  # printed once the tests have ended.
  style_pid=""
  if [[ $preset == dev ]]; then
    nice -n 19 bash scripts/check_style.sh >build/dev/style.log 2>&1 &
    style_pid=$!
  elif [[ -n $next ]]; then
    mkdir -p build
    nice -n 19 bash -c "$(declare -f build_preset); jobs=$jobs; build_preset $next" >"build/$next-build.log" 2>&1 &
    early_pid=$! early_preset=$next
  fi
  echo "== $preset: ctest"
  # The extended Open MPI 5 tests run our binaries inside a Debian 13 root, where the
  # sanitizer runtimes of this compiler do not exist: they run in the dev preset only.
  extra=()
  [[ $preset == asan ]] && extra=(-LE extended)
  log=build/$preset/ctest-summary.log
  # One ctest job per core, and one more for the image build, which takes no core of its own
  # (tests/CMakeLists.txt, TMPI_BESIDE): every other test takes one of nproc "cores".
  resources=$PWD/build/$preset/ctest-resources.json  # absolute: ctest reads it from the build folder
  printf '{"version": {"major": 1, "minor": 0}, "local": [{"cores": [{"id": "0", "slots": %d}]}]}\n' \
    "$jobs" >"$resources"
  # shellcheck disable=SC2086 # TMPI_CTEST_ARGS is a list of words
  ctest --preset "$preset" -j "$((jobs + 1))" --resource-spec-file "$resources" "${extra[@]}" ${TMPI_CTEST_ARGS:-} \
    2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  style_line=""
  if [[ -n $style_pid ]]; then
    echo "== style: clang-format and clang-tidy (run beside the dev tests)"
    style_status=0
    wait "$style_pid" || style_status=$?
    cat build/dev/style.log
    if [[ $style_status == 0 ]]; then
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

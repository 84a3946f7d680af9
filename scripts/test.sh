#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the dev (warnings as errors),
# asan and fuzz (libFuzzer, bounded runs) presets, and runs every test of each with ctest. Cluster-in-a-box tests need
# root; they fail, never skip, without it. Set TMPI_TEST_PRESETS="dev" for a quicker run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
for preset in ${TMPI_TEST_PRESETS:-dev asan fuzz}; do
  echo "== $preset: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== $preset: ctest"
  # The extended Open MPI 5 test runs our binaries inside a Debian 13 root, where the
  # sanitizer runtimes of this compiler do not exist: it runs in the dev preset only.
  extra=""
  [[ $preset == asan ]] && extra="-LE extended"
  ctest --preset "$preset" -j "$jobs" $extra ${TMPI_CTEST_ARGS:-}
done

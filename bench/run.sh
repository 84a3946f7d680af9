#!/usr/bin/env bash
# bench/run.sh: every benchmark, printed as one table (ours beside a baseline measured in
# the same run, and their ratio). Each benchmark is a script bench/rows/*.sh that prints
# rows "name | ours | baseline | ratio | target"; medians of several runs, since this
# machine is noisy. Benchmarks are never timed tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
export TMPI_BUILD_DIR=$PWD/build/release
printf '| %s | %s | %s | %s | %s |\n' benchmark ours baseline ratio target
printf '|---|---|---|---|---|\n'
for row in bench/rows/*.sh; do
  [[ -e $row ]] || continue
  bash "$row"
done

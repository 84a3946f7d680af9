#!/usr/bin/env python3
"""Which translation units clang-tidy reads so that every given source is checked.

The dev preset compiles in unity batches: CMake writes files of `#include "/abs/x.cpp"`
lines (build/.../Unity/unity_N_cxx.cxx), and compile_commands.json names those batches, not
the sources. clang-tidy over a batch parses the heavy headers (Boost, nlohmann, spdlog)
once for its eight or so sources instead of once per source: the style check takes about a
third of the time. Its diagnostics in the batched sources are shown because .clang-tidy's
HeaderFilterRegex takes the programs' .cpp files too.

    tidy_units.py COMPILE_COMMANDS SOURCE...

prints one unit a line, the largest batches first (so that `xargs -P` ends them together):
the batches that cover the sources (a source built by two targets, as the lean libraries'
are, in one batch only where that suffices), then each source that no batch holds, as
itself: clang-tidy reads its own compile command, or, for a source this configuration does
not build (ncclcheck/nccl_missing.cpp where NCCL is found), the command of its nearest
neighbour in the database. A batch with anything beside the given sources (tests, bench)
is not used.
"""
import json
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^#include "([^"]+)"$')


def batch_sources(path):
    """The absolute sources a unity batch includes, or None when the file is not a batch."""
    if "/Unity/unity_" not in path:
        return None
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return {m.group(1) for m in (INCLUDE.match(line) for line in lines) if m}


def main(argv):
    if len(argv) < 3:
        print("usage: tidy_units.py COMPILE_COMMANDS SOURCE...", file=sys.stderr)
        return 2
    commands = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    wanted = {str(Path(s).resolve()) for s in argv[2:]}
    batches = {}
    for entry in commands:
        file = str(Path(entry["directory"], entry["file"]).resolve())
        included = batch_sources(file)
        if included and included <= wanted:
            batches[file] = included
    units, covered = [], set()
    # Greedy: the batch that checks the most sources not yet checked, until none adds any.
    while True:
        best = max(batches, key=lambda b: (len(batches[b] - covered), b), default=None)
        if best is None or not batches[best] - covered:
            break
        units.append((len(batches[best]), best))
        covered |= batches.pop(best)
    units += [(1, file) for file in sorted(wanted - covered)]
    for _, unit in sorted(units, key=lambda u: (-u[0], u[1])):
        print(unit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

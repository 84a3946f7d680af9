#!/usr/bin/env python3
"""The docs check fails where it must: breaks planted in a small tree of its own.

Usage: planted_test.py CHECK_DOCS   (the path of scripts/check_docs.py)
A contract (docs/design.md) and a log of decisions (docs/decisions.md) that pass the check;
then one break at a time, each of which must fail it (exit 1) with its own line. The tree
has no .git, so the check lists its files by walking it.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

CONTRACT = """# design

## Ports

The coordinator listens on 29410 ([D1](decisions.md#d1-one-port)).

## Phases

The ssh step runs beside the launch ([D2](decisions.md#d2-the-ssh-step-beside)).
"""
DECISIONS = """# decisions

### D1. One port

**Decision.** One port.
Contract: [Ports](design.md#ports).

### D2. The ssh step beside

**Decision.** Beside the launch.
Contract: [Phases](design.md#phases).

## Not yet split

- [Ports](design.md#ports).
"""
# (what the break is, the file, the text replaced, its replacement, what the check must say)
BREAKS = [
    ("a number skipped", "decisions", "### D2.", "### D3.", "decision D3 where D2 comes next"),
    ("a number repeated", "decisions", "### D2. The", "### D1. The", "decision D1 where D2 comes next"),
    ("an entry with no link back", "decisions", "Contract: [Ports](design.md#ports).\n", "",
     "decision D1 links no section of docs/design.md"),
    ("a link back to no section", "decisions", "(design.md#phases)", "(design.md#phase)",
     "no heading with anchor #phase in docs/design.md"),
    ("an entry the contract never links", "design", " ([D2](decisions.md#d2-the-ssh-step-beside))", "",
     "decision D2 is linked from nowhere in docs/design.md"),
    ("a link's number that is not its anchor's", "design", "[D2](decisions.md#d2", "[D1](decisions.md#d2",
     "link [D1] points at decision D2"),
    ("a link to a renamed entry", "decisions", "### D1. One port", "### D1. One listening port",
     "no heading with anchor #d1-one-port in docs/decisions.md"),
]


def run(check, contract, decisions):
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "docs").mkdir()
        (Path(root) / "docs/design.md").write_text(contract)
        (Path(root) / "docs/decisions.md").write_text(decisions)
        p = subprocess.run([sys.executable, check, root], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def main():
    check = sys.argv[1]
    code, out = run(check, CONTRACT, DECISIONS)
    failures = [] if code == 0 else [f"the tree without a break fails (exit {code}):\n{out}"]
    for what, doc, old, new, said in BREAKS:
        text = {"design": CONTRACT, "decisions": DECISIONS}
        assert old in text[doc], what
        text[doc] = text[doc].replace(old, new, 1)
        code, out = run(check, text["design"], text["decisions"])
        if code != 1 or said not in out:
            failures.append(f"{what}: exit {code}, expected 1 and \"{said}\"; it said:\n{out}")
    for f in failures:
        print("FAIL:", f)
    print(f"planted_test: {len(BREAKS)} breaks, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

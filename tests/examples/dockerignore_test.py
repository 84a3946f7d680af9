#!/usr/bin/env python3
"""dockerignore_test.py: what `docker build -f images/Dockerfile .` sends as its context.

Design: Docker (BuildKit) reads images/Dockerfile.dockerignore, the ignore file named after
the Dockerfile, and matches its patterns as moby/patternmatcher does: each line cleaned of
surrounding blanks, a leading `/` and `./`; `*` any run of characters but `/`, `?` one such
character, `**` any number of folders; a pattern that matches a folder leaves out all below
it; the last pattern that matches a path decides, `!` lines keeping it. With that matcher:
every file that git tracks, or that is new and not ignored, must stay in (the build stage
needs the tree); every file git ignores (the build trees, caches, bytecode) must stay out,
and so must a few such paths that a fresh checkout may not have yet. No Docker needed.
usage: dockerignore_test.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILE = os.path.join(SRC, "images", "Dockerfile")
MUST_BE_OUT = ["build/release/CMakeCache.txt", "build/dev/bin/mpi-init", ".git/HEAD", ".git/objects/ab/cdef",
               "tests/examples/__pycache__/trainer_model.cpython-311.pyc", "__pycache__/x.pyc", "scripts/x.pyc",
               ".cache/clangd/index/a.idx", "compile_commands.json", "common/files.cpp.tmp.123"]
MUST_BE_IN = ["CMakeLists.txt", "CMakePresets.json", "scripts/install-deps.sh", "common/files.cpp",
              "images/Dockerfile", "tests/CMakeLists.txt", "cmake"]


def patterns(path):
    """[(exclude?, regex)] in file order (moby/patternmatcher compile; BuildKit dockerignore ReadAll)."""
    out = []
    with open(path) as stream:
        for line in stream:
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            keep = text.startswith("!")
            text = os.path.normpath(text[1:].strip() if keep else text).lstrip("/")
            regex, i = "^", 0
            while i < len(text):
                if text.startswith("**", i):
                    i += 3 if text.startswith("**/", i) else 2
                    regex += ".*" if i >= len(text) else "(.*/)?"
                    continue
                regex += {"*": "[^/]*", "?": "[^/]"}.get(text[i], re.escape(text[i]))
                i += 1
            out.append((not keep, re.compile(regex + "$")))
    return out


def excluded(rules, path):
    """moby/patternmatcher MatchesOrParentMatches: a pattern matches the path or a parent."""
    parts, verdict = path.split("/"), False
    for exclude, regex in rules:
        if any(regex.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            verdict = exclude
    return verdict


def git(*args):
    # -z: the names as they are. Without it git quotes a name with non-ASCII bytes
    # ("build/.../F\305\221tan...pem", a CA file of an image root), which no pattern matches.
    try:
        out = subprocess.run(["git", "-C", SRC, *args, "-z"], check=True, capture_output=True).stdout
        return [name.decode("utf-8", "surrogateescape") for name in out.split(b"\0") if name]
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"FAIL: `git {' '.join(args)}` in {SRC}: {error}; this test reads the file lists of a git checkout")


def main():
    failures = []
    ignore_file = DOCKERFILE + ".dockerignore"
    if not os.path.isfile(ignore_file):
        print(f"FAIL: {os.path.relpath(ignore_file, SRC)} is missing: BuildKit looks for <Dockerfile>.dockerignore")
        return 1
    rules = patterns(ignore_file)
    kept = git("ls-files", "--cached", "--others", "--exclude-standard")
    ignored = git("ls-files", "--others", "--ignored", "--exclude-standard")
    failures += [f"{p}: left out of the context, but git tracks it (or it is new)" for p in kept + MUST_BE_IN
                 if excluded(rules, p)]
    failures += [f"{p}: sent with the context, but it is a build or cache file" for p in ignored + MUST_BE_OUT
                 if not excluded(rules, p)]
    with open(DOCKERFILE) as stream:
        if "COPY . /src" not in stream.read():
            failures.append("images/Dockerfile no longer copies the whole context: revisit the ignore file")
    for line in failures[:40]:
        print("FAIL:", line)
    print(f"{'FAILED' if failures else 'ok'}: {len(rules)} patterns; {len(kept)} files kept, "
          f"{len(ignored)} ignored files left out, {len(MUST_BE_OUT)} known build and cache paths left out")
    return 1 if failures or len(kept) < 100 else 0


if __name__ == "__main__":
    sys.exit(main())

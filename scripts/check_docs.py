#!/usr/bin/env python3
"""The docs' references, checked: every file and section the docs name exists.

Usage: check_docs.py [-v] [ROOT]   (ROOT: the checkout, default this script's parent's parent)
Prints each dangling reference as FILE:LINE: what, and exits 1; exits 0 when there is none.
Run by ctest as docs.references (tests/docs/CMakeLists.txt).

The docs read: README.md, ARCHITECTURE.md, docs/*.md, bench/README.md, tests/README.md.
The tree: `git ls-files --cached --others --exclude-standard` (tracked, and new files not
ignored), less files deleted from the work tree; where git cannot answer (no .git), every
file under ROOT but hidden folders and build*/.

The rule for a path. Candidates are inline code spans (`...`) and link targets ([x](...)),
outside fenced code blocks; in a fenced block marked sh, bash, shell or console, each
whitespace-separated word (a command's own paths); any other fenced block (no language,
text: outputs, diagrams) is not read. A candidate is first cleaned: surrounding
punctuation, a trailing :LINE, a link's #anchor and a leading ./ removed; {a,b} expanded.
It is left alone when it
  - is a URL (scheme://, mailto:), or absolute (/etc/..., /opt/...: the pod's or the
    system's files, never the tree's), or starts with ~ or $;
  - is an upstream citation: a source key before a colon, `T:pkg/...`, `J:...`, `MO:...`
    (one to three capitals, docs/trainer-rules.md's "Sources read"); or another project's
    file named as it is in that project, listed in UPSTREAM below with whose it is
    (libssh's `src/poll.c`, Horovod's `docs/mpi.rst`): a doc that cites a new one adds it;
  - holds a character no path of ours has (space, <, >, =, @, |, quotes), or its first
    folder is build/ (build outputs, never tracked).
It is a path of the tree, and must exist, when
  (a) its first component is a top-level entry of the tree (`launcher/verdict.h`,
      `tests/cluster/cib`, `manifests/trainer-v2.3`, `README.md`): from the root; without
      an extension it may name a module, `common/kube_client` for common/kube_client.*;
  (b) it has a / and its first component is an entry of the doc's own folder
      (bench/README.md's `rows/scale.sh`): from that folder;
  (c) it is a bare file name (no /) ending in a code extension (.h .hpp .c .cc .cpp .py .sh
      .cmake .md): the name of some file of the tree (ARCHITECTURE.md's rows name files
      within their folder: `error.h`; there and in docs/design.md, `verdict.*` too, where
      elsewhere `name.*` is a test glob, `examples.*`);
  (d) it has a /, is not (a) or (b), and ends in a code extension: a misspelt folder of ours
      (`lanucher/run.cpp`) unless cited by a source key (above).
  A * or ? makes it a glob (fnmatch, over paths for (a), (b), (d), over file names for (c)):
  at least one file must match. A folder exists when some file lies under it.
Everything else (`nvidia.com/gpu`, `jobset.x-k8s.io/v1alpha2`, `bin/`, `report.json`) is
not a path of the tree and is not checked.

The rule for a section. A section of a doc is a heading, a bold run-in title
(**MPI's ssh over the check's connections**), a list item's lead term ("- Trust: ...") or a
paragraph's first words ("Your own mpirun line runs under ..."). A reference names one when
its text is the section's, or the section's text begins with it followed by " (", ":", "."
or "," (a paragraph's: or a space), case aside: "The runtimes" names "The runtimes (Trainer
v2.3, ...)". References are
  - a quoted title after a doc's name: `docs/design.md`, "Trust"; README, "Your own mpirun
    line"; then more titles joined by ", then", "and", "or": "In short", then "Names";
  - a quoted title after above, below, see, or "In ": (below, "The runtimes"): the same doc;
  - a parenthesised title that begins with "The " or ends in above/below, in docs/design.md's
    style: (The bundle), (Non-root below; ...): the same doc. A parenthesis that merely names
    a heading, (Non-root), cannot be told from prose, and is not checked.
Anchors: every link [x](#anchor) or [x](file.md#anchor) must be a heading's GitHub anchor in
that file (lower case, punctuation but - and _ dropped, spaces as -, -1, -2 for repeats).

The log of decisions (docs/decisions.md, beside the contract docs/design.md). Its entries are
the headings "### Dn. Title", numbered D1, D2, ... in order, none missing or repeated; each
entry links back to the contract ([x](design.md#anchor), checked as every anchor is); and
the contract links each entry at least once. A link whose text is a decision's number, [D5],
must point at that decision's anchor (#d5-...), so that a renumbered or mistyped link is
caught even where its anchor exists.
"""
import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = ["README.md", "ARCHITECTURE.md", "docs/*.md", "bench/README.md", "tests/README.md"]
CONTRACT, DECISIONS = "docs/design.md", "docs/decisions.md"
CODE_EXTS = {".h", ".hpp", ".c", ".cc", ".cpp", ".py", ".sh", ".cmake", ".md"}
# Other projects' files that the docs name without a source key: the text as the docs write
# it, and whose file it is. A citation of a new one adds its line here.
UPSTREAM = {
    "sshkey.c": "OpenSSH", "srclimit.c": "OpenSSH",
    "src/poll.c": "libssh", "src/session.c": "libssh", "src/gssapi.c": "libssh",
    "src/channels.c": "libssh", "src/socket.c": "libssh", "examples/ssh_server.c": "libssh",
    "src/pki_crypto.c": "libssh", "src/messages.c": "libssh",
    "providers/implementations/rands/drbg.c": "OpenSSL",
    "monitor.c": "OpenSSH", "sandbox-seccomp-filter.c": "OpenSSH",
    "sysexits.h": "glibc", "nccl.h": "NCCL", "cuda.h": "CUDA",
    "discover_hosts.sh": "mpi-operator",
    "docs/operator-guides/installation.md": "Kubeflow Trainer", "docs/mpi.rst": "Horovod",
    "constants.py": "kubeflow/sdk", "backends/kubernetes/utils.py": "kubeflow/sdk",
    "backends/kubernetes/backend.py": "kubeflow/sdk",
}
# The docs that map the code file by file: there a bare `name.*` names our files.
CODE_MAPS = {"ARCHITECTURE.md", "docs/design.md"}
SHELL_FENCES = {"sh", "bash", "shell", "console"}
BAD_CHARS = re.compile(r"[\s<>=@|\"'`\\]")
SOURCE_KEY = re.compile(r"^[A-Z]{1,3}:")


def tree_files(root):
    try:
        out = subprocess.run(
            ["git", "-c", "safe.directory=*", "-C", str(root), "ls-files", "-z", "--cached",
             "--others", "--exclude-standard"],
            check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f and (root / f).exists()]
        if files:
            return set(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    files = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if not d.startswith(".") and not (rel == "." and d.startswith("build"))]
        for f in filenames:
            files.add(os.path.normpath(os.path.join(rel, f)))
    return files


class Tree:
    def __init__(self, root):
        self.files = tree_files(root)
        self.dirs = set()
        for f in self.files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self.top = {p.split("/")[0] for p in self.files}
        self.names = {}
        for f in self.files:
            self.names.setdefault(f.rsplit("/", 1)[-1], []).append(f)

    def exists(self, path):
        path = os.path.normpath(path).rstrip("/")
        if any(c in path for c in "*?["):
            return any(fnmatch.fnmatchcase(f, path) for f in self.files) or any(
                fnmatch.fnmatchcase(d, path) for d in self.dirs)
        return path in self.files or path in self.dirs

    def name_exists(self, name):
        if any(c in name for c in "*?["):
            return any(fnmatch.fnmatchcase(n, name) for n in self.names)
        return name in self.names

    def entries(self, folder):
        prefix = folder + "/" if folder else ""
        return {p[len(prefix):].split("/")[0] for p in self.files if p.startswith(prefix)}


def expand_braces(s):
    m = re.search(r"\{([^{}]*,[^{}]*)\}", s)
    if not m:
        return [s]
    return [x for alt in m.group(1).split(",")
            for x in expand_braces(s[:m.start()] + alt + s[m.end():])]


def clean(token):
    token = token.strip().strip(",;.:()\"'")
    token = re.sub(r"#.*$", "", token)
    token = re.sub(r":\d+(-\d+)?$", "", token)
    if token.startswith("./"):
        token = token[2:]
    return token


def path_problem(token, doc_dir, tree, bare_ok):
    """None when the token is no path of the tree or names one that exists; else the text."""
    if not token or re.match(r"^[a-z][a-z0-9+.-]*://|^mailto:", token) or token[0] in "/~$-":
        return None
    if SOURCE_KEY.match(token) or BAD_CHARS.search(token) or token in UPSTREAM:
        return None
    if token.split("/")[0] in ("build", "..") or token in (".", ".."):
        return None
    for path in expand_braces(token):
        first = path.split("/")[0]
        ext = os.path.splitext(path.rstrip("/"))[1]
        if first in tree.top:
            ok = tree.exists(path) or (not ext and tree.exists(path + ".*"))
        elif "/" in path and doc_dir and first in tree.entries(doc_dir):
            ok = tree.exists(doc_dir + "/" + path)
        elif "/" not in path:
            if not bare_ok:
                continue
            if not (ext in CODE_EXTS or (ext == ".*" and bare_ok == "map"
                                         and re.match(r"^[a-z0-9_]+\.\*$", path))):
                continue
            ok = tree.name_exists(path)
        elif ext in CODE_EXTS and not any(c in first for c in "*?"):
            ok = tree.exists(path) or (doc_dir and tree.exists(doc_dir + "/" + path))
        else:
            continue
        if not ok:
            return f"no such file or folder: {path}"
    return None


def blank_fences(lines):
    """The lines with fenced blocks blanked, and [(line number, text)] of shell fences' lines."""
    out, shell = [], []
    fence, lang = None, ""
    for n, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```+|~~~+)\s*([\w-]*)", line)
        if fence is None and m:
            fence, lang = m.group(1), m.group(2).lower()
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence[:3]) and line.strip().strip(fence[0]) == "":
                fence = None
            elif lang in SHELL_FENCES:
                shell.append((n, line))
            out.append("")
        else:
            out.append(line)
    return out, shell


def slug(text):
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Doc:
    def __init__(self, path, text):
        self.path = path
        self.lines, self.shell = blank_fences(text.split("\n"))
        self.sections, self.anchors, self.paragraphs = set(), set(), []
        seen = {}
        for i, line in enumerate(self.lines):
            if line.strip() and (i == 0 or not self.lines[i - 1].strip()) and line[0].isalpha():
                self.paragraphs.append(" ".join(line.split()).casefold())
            h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h:
                title = h.group(1)
                self.sections.add(title.replace("`", "").casefold())
                s = slug(title)
                n = seen.get(s, 0)
                seen[s] = n + 1
                self.anchors.add(s if n == 0 else f"{s}-{n}")
            for b in re.findall(r"\*\*([^*]+)\*\*", line):
                self.sections.add(b.replace("`", "").strip().rstrip(".:").casefold())
            lead = re.match(r"^\s*[-*]\s+([A-Z][^:(`*\n]{0,60}?)(?::| \()", line)
            if lead:
                self.sections.add(lead.group(1).strip().casefold())

    def has_section(self, ref):
        ref = " ".join(ref.replace("`", "").split()).casefold()
        for s in self.sections:
            rest = s[len(ref):] if s.startswith(ref) else None
            if rest is not None and (rest == "" or rest[:2] == " (" or rest[:1] in ":.,"):
                return True
        for p in self.paragraphs:  # a paragraph's first words
            rest = p[len(ref):] if p.startswith(ref) else None
            if rest is not None and (rest == "" or rest[:1] in " :.,"):
                return True
        return False


def decision_problems(docs):
    """The log of decisions held to its numbering and links: [(doc, line, what)]."""
    if DECISIONS not in docs:
        return []
    log, problems = docs[DECISIONS], []
    entries = []  # (number, line, anchor, the entry's lines)
    for i, line in enumerate(log.lines):
        h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if h and entries and entries[-1][3] is None and len(h.group(1)) <= 3:
            entries[-1] = entries[-1][:3] + (i,)
        d = re.match(r"^###\s+D(\d+)\.\s+\S", line)
        if d:
            if entries and entries[-1][3] is None:
                entries[-1] = entries[-1][:3] + (i,)
            entries.append((int(d.group(1)), i + 1, slug(line.lstrip("#").strip()), None))
    for k, (number, n, anchor, end) in enumerate(entries):
        if number != k + 1:
            problems.append((DECISIONS, n, f"decision D{number} where D{k + 1} comes next"))
        body = log.lines[n:end]
        if not any(re.search(r"\]\(design\.md#[^)\s]+\)", b) for b in body):
            problems.append((DECISIONS, n, f"decision D{number} links no section of {CONTRACT}"))
    cited = set()
    for path, doc in docs.items():
        for n, line in enumerate(doc.lines, 1):
            for text, target in re.findall(r"\[([^\]\n]*)\]\(([^)\s]*#d\d+-[^)\s]*)\)", line):
                file_part, _, anchor = target.partition("#")
                if (file_part and not file_part.endswith("decisions.md")) or (
                        not file_part and path != DECISIONS):
                    continue
                number = re.match(r"d(\d+)-", anchor).group(1)
                m = re.fullmatch(r"D(\d+)", text.strip())
                if m and m.group(1) != number:
                    problems.append((path, n, f"link [{text}] points at decision D{number}"))
                if path == CONTRACT:
                    cited.add(anchor)
    if CONTRACT in docs:
        for number, n, anchor, _ in entries:
            if anchor not in cited:
                problems.append((DECISIONS, n, f"decision D{number} is linked from nowhere in {CONTRACT}"))
    return problems


def main():
    args = sys.argv[1:]
    verbose = "-v" in args  # -v: every section reference found, and what it names
    args = [a for a in args if a != "-v"]
    root = Path(args[0] if args else Path(__file__).resolve().parent.parent)
    root = root.resolve()
    tree = Tree(root)
    doc_paths = []
    for pattern in DOCS:
        doc_paths += sorted(p for p in tree.files if fnmatch.fnmatchcase(p, pattern))
    docs = {p: Doc(p, (root / p).read_text(encoding="utf-8")) for p in doc_paths}
    problems = []

    def doc_for(name, here):
        """The doc a name points to, from here's folder or the root; None if not one of DOCS."""
        for cand in (os.path.normpath(os.path.join(os.path.dirname(here), name)),
                     os.path.normpath(name)):
            if cand in docs:
                return cand
        return None

    for path, doc in docs.items():
        doc_dir = os.path.dirname(path)

        def section(n, title, target):
            if verbose:
                print(f'{path}:{n}: section "{title}" of {target}')
            if not docs[target].has_section(title):
                report(n, f'no section "{title}" in {target}')
        bare = "map" if path in CODE_MAPS else True

        def report(n, what):
            problems.append(f"{path}:{n}: {what}")

        # Paths: code spans and link targets outside fences; shell fences' words.
        for n, line in enumerate(doc.lines, 1):
            for span in re.findall(r"`([^`\n]+)`", line):
                words = span.split()
                if len(words) == 1:
                    p = path_problem(clean(words[0]), doc_dir, tree, bare)
                else:  # a command: its words that are paths of the tree, not bare names
                    p = next(filter(None, (path_problem(clean(w), doc_dir, tree, False)
                                           for w in words)), None)
                if p:
                    report(n, p)
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                file_part, _, anchor = target.partition("#")
                if file_part:
                    p = path_problem(clean(file_part), doc_dir, tree, bare)
                    if p:
                        report(n, p)
                        continue
                if anchor and (not file_part or file_part.endswith(".md")):
                    other = doc_for(file_part, path) if file_part else path
                    if other is None:
                        if file_part and not re.match(r"^[a-z]+:", file_part):
                            report(n, f"anchor in a file this check does not read: {target}")
                    elif anchor not in docs[other].anchors:
                        report(n, f"no heading with anchor #{anchor} in {other}")
        for n, line in doc.shell:
            line = re.sub(r"^\s*\$\s+", "", line)
            for w in line.split():
                p = path_problem(clean(w), doc_dir, tree, bare_ok=False)
                if p:
                    report(n, p)

        # Sections.
        text = "\n".join(doc.lines)
        line_of = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
        more = re.compile(r',?\s+(?:then|and|or)\s+"([^"\n]+)"')

        def titles_after(m):
            out = [(m.start("t"), m.group("t"))]
            pos = m.end()
            while True:
                k = more.match(text, pos)
                if not k:
                    return out
                out.append((k.start(1), k.group(1)))
                pos = k.end()

        for m in re.finditer(r'(?:`(?P<f>[\w./-]+\.md)`|\b(?P<r>README)\b)(?:\'s)?,?\s+"(?P<t>[^"\n]+)"',
                             text):
            name = m.group("f") or "README.md"
            target = doc_for(name, path) if m.group("f") else "README.md"
            if target is None:
                report(line_of(m.start()), f"section of a file this check does not read: {name}")
                continue
            for pos, title in titles_after(m):
                section(line_of(pos), title, target)
        for m in re.finditer(r'\b(?:above|below|[Ss]ee|In)\b,?\s+"(?P<t>[^"\n]+)"', text):
            for pos, title in titles_after(m):
                section(line_of(pos), title, path)
        for m in re.finditer(r'\((?P<t>The [^()`"\n]{1,60}?|[A-Z][^()`"\n,;]{0,60}?'
                             r'(?= (?:above|below)\b))(?: (?:above|below))?(?=[);,])', text):
            section(line_of(m.start("t")), m.group("t"), path)

    problems += [f"{path}:{n}: {what}" for path, n, what in decision_problems(docs)]
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs: {len(problems)} dangling reference(s)", file=sys.stderr)
        return 1
    print(f"check_docs: {len(docs)} docs, no dangling reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())

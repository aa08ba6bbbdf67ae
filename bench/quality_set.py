"""The masked-code tasks of bench_quality.py, drawn from the running Python's standard library.

In the manner of CrossCodeEval: a line (or a short span of lines) of real code is removed, the
cursor is put after its indentation, and a suggestion there is right when it gives the removed
code back. The source is code this project did not write, pinned by the Python version that
runs the bench. A task is cross-file when the removed code uses a name its module imports from
another module of the same package (`from .utils import quote`, `from email import utils`):
those modules are the tabs an editor would have open beside it.

The draw is deterministic for a seed. A file masked in one task is never a tab of another, so a
server that remembers what it saw cannot leak one task's answer into the next.
"""

from __future__ import annotations

import ast
import io
import random
import sysconfig
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Whole trees left out: tests hold odd code on purpose; the others are GUI demos or vendored.
_SKIPPED_TOP = {"test", "idlelib", "lib2to3", "tkinter", "turtledemo", "ensurepip", "distutils"}
_SKIPPED_TOP |= {"site-packages", "dist-packages", "pydoc_data", "encodings", "__phello__"}
_TRIVIAL = {"pass", "else:", "try:", "finally:", "return", "break", "continue", "raise", "}"}
_MIN_CHARS, _MAX_CHARS = 8, 120
_MAX_FILE_BYTES = 150_000
_MIN_LINE = 12  # some code before the cursor


@dataclass(frozen=True, slots=True)
class Task:
    kind: str  # "line", "span" or "cross-file"
    relpath: str  # under the standard library, e.g. "email/utils.py"
    line: int  # 0-based first masked line
    target: str  # the masked code, lines joined by "\n", each without its indentation
    indent: str
    lines: int  # how many lines are masked
    tabs: tuple[str, ...]  # relpaths of imported modules of the same package (cross-file)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.relpath}:{self.line + 1}"


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def masked_text(source: str, task: Task, window_chars: int = 0) -> tuple[str, int]:
    """The document with the task's code removed, and the 0-based line of the cursor (which
    stands after the indentation). With `window_chars`, only whole lines within that many
    characters before the cursor, and a third of it after, are kept."""
    lines = source.splitlines(keepends=True)
    before = lines[: task.line]
    after = lines[task.line + task.lines :]
    if window_chars:
        before = _tail_within(before, window_chars)
        after = _tail_within(after[::-1], window_chars // 3)[::-1]
    return "".join(before) + task.indent + "\n" + "".join(after), len(before)


def _tail_within(lines: list[str], chars: int) -> list[str]:
    kept: list[str] = []
    total = 0
    for line in reversed(lines):
        total += len(line)
        if total > chars:
            break
        kept.append(line)
    return kept[::-1]


def draw_tasks(seed: int, *, lines: int, spans: int, cross_file: int) -> list[Task]:
    """`lines` single lines, `spans` two- or three-line spans and `cross_file` single lines
    that use a name imported from another module of their package."""
    root = stdlib_root()
    rng = random.Random(seed)
    files = _package_files(root)
    rng.shuffle(files)
    analysed = {rel: _analyse(root, rel) for rel in files}
    taken: set[str] = set()  # files masked
    tabs_used: set[str] = set()  # files opened as tabs
    tasks: list[Task] = []

    def usable(rel: str, tabs: tuple[str, ...]) -> bool:
        return rel not in tabs_used and not (set(tabs) & taken) and rel not in tabs

    cross = _round_robin(
        rng, files, lambda rel: [c for c in analysed[rel].candidates if c.tabs], cross_file
    )
    for rel, cand in cross:
        if len(tasks) < cross_file and rel not in taken and usable(rel, cand.tabs):
            taken.add(rel)
            tabs_used.update(cand.tabs)
            tasks.append(cand.task("cross-file", 1))
    in_file = _round_robin(rng, files, lambda rel: analysed[rel].candidates, lines + spans)
    want_lines, want_spans = lines, spans
    for rel, cand in in_file:
        if rel in tabs_used or rel in taken:
            continue
        if want_spans and cand.span_room >= 2:
            size = rng.choice([n for n in (2, 3) if n <= cand.span_room])
            want_spans -= 1
        elif want_lines:
            size = 1
            want_lines -= 1
        else:
            continue
        taken.add(rel)
        tasks.append(cand.task("span" if size > 1 else "line", size))
    return tasks


@dataclass(frozen=True, slots=True)
class _Candidate:
    relpath: str
    line: int
    code: tuple[str, ...]  # this line and the ones that may join it in a span, stripped
    indent: str
    span_room: int  # how many lines from here stay in the same block
    tabs: tuple[str, ...]

    def task(self, kind: str, size: int) -> Task:
        return Task(
            kind=kind,
            relpath=self.relpath,
            line=self.line,
            target="\n".join(self.code[:size]),
            indent=self.indent,
            lines=size,
            tabs=self.tabs if kind == "cross-file" else (),
        )


@dataclass(frozen=True, slots=True)
class _Analysis:
    candidates: tuple[_Candidate, ...]


def _package_files(root: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if len(rel.parts) < 2 or rel.parts[0] in _SKIPPED_TOP or {"test", "tests"} & set(rel.parts):
            continue
        if not (path.parent / "__init__.py").is_file():
            continue
        if path.stat().st_size > _MAX_FILE_BYTES:
            continue
        found.append(rel.as_posix())
    return found


def _analyse(root: Path, rel: str) -> _Analysis:
    source = (root / rel).read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(source)
        code_lines = _code_line_starts(source)
    except (SyntaxError, tokenize.TokenError, IndentationError, ValueError):
        return _Analysis(())
    imported = _imported_from_package(root, rel, tree)
    lines = source.splitlines()
    candidates: list[_Candidate] = []
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if i < _MIN_LINE or i not in code_lines or not _MIN_CHARS <= len(stripped) <= _MAX_CHARS:
            continue
        if stripped.startswith(("#", "@", "import ", "from ")) or stripped in _TRIVIAL:
            continue
        indent = raw[: len(raw) - len(raw.lstrip())]
        block = [stripped]
        for following in lines[i + 1 : i + 3]:
            f_indent = following[: len(following) - len(following.lstrip())]
            if not following.strip() or f_indent != indent or (i + len(block)) not in code_lines:
                break
            block.append(following.strip())
        names = _names_in(stripped)
        tabs = tuple(sorted({imported[n] for n in names if n in imported}))
        candidates.append(_Candidate(rel, i, tuple(block), indent, len(block), tabs))
    return _Analysis(tuple(candidates))


def _code_line_starts(source: str) -> set[int]:
    """0-based lines where a logical line of code starts (no string or comment first)."""
    starts: set[int] = set()
    new_line = True
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NEWLINE:
            new_line = True
            continue
        if tok.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
            continue
        if new_line and tok.type not in (tokenize.STRING, tokenize.ENDMARKER):
            starts.add(tok.start[0] - 1)
        new_line = False
    return starts


def _names_in(code: str) -> set[str]:
    try:
        return {
            t.string
            for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type == tokenize.NAME
        }
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()


def _imported_from_package(root: Path, rel: str, tree: ast.Module) -> dict[str, str]:
    """Names bound by imports of other modules of the same top-level package -> their file."""
    here = Path(rel)
    package_parts = list(here.parent.parts)
    top = package_parts[0]
    result: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package_parts[: len(package_parts) - (node.level - 1)]
            if node.level - 1 > len(package_parts) - 1:
                continue
        elif node.module and node.module.split(".")[0] == top:
            base = []
        else:
            continue
        module_parts = [*base, *(node.module.split(".") if node.module else [])]
        for alias in node.names:
            bound = alias.asname or alias.name
            module_file = _module_file(root, module_parts)
            if module_file is not None and module_file != rel:
                result[bound] = module_file
            else:
                submodule = _module_file(root, [*module_parts, alias.name])
                if submodule is not None and submodule != rel:
                    result[bound] = submodule
    return result


def _module_file(root: Path, parts: list[str]) -> str | None:
    if not parts:
        return None
    as_file = root.joinpath(*parts).with_suffix(".py")
    if as_file.is_file():
        return as_file.relative_to(root).as_posix()
    return None


def _round_robin(
    rng: random.Random,
    files: list[str],
    candidates_of: Callable[[str], Sequence[_Candidate]],
    count: int,
) -> list[tuple[str, _Candidate]]:
    """Candidates one per file, in file order (each file's own order random); the caller takes
    the first usable `count` (files may be used once, so plenty are offered)."""
    chosen: list[tuple[str, _Candidate]] = []
    for rel in files:
        pool = list(candidates_of(rel))
        if pool:
            chosen.append((rel, rng.choice(pool)))
    return chosen

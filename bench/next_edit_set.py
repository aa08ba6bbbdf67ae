"""The next-edit tasks of bench_next_edit.py: real edit sequences from public Python projects.

A commit that changes one Python file in two or more small hunks is a sequence of edits by
the person who wrote it. Applied top to bottom (the order a person reading down the file
works in), the earlier hunks are the history and the last one is the edit that comes next.
Each record of `data/next_edit/tasks.jsonl` is one such commit, cut to the lines around its
hunks, and gives two tasks:

- an **edit** task: the earlier hunks applied, the cursor at the end of the last of them; the
  right answer is the last hunk;
- a **nothing-to-do** task (of every other record): every hunk applied, the cursor at the end
  of the last; the commit is complete, so the right answer is no edit.

The records are derived from the commits named in each (repository, commit, path); the
projects' licences are in `data/next_edit/LICENSES/`. Rebuild them (not run by the tests) from
clones of the repositories at the commits in `PINNED`:

    git clone https://github.com/pallets/click /tmp/click   # and the others in PINNED
    python -m bench.next_edit_set pallets/click=/tmp/click psf/requests=/tmp/requests \
        python-attrs/attrs=/tmp/attrs encode/httpx=/tmp/httpx

The selection is deterministic for those heads: the commits are read newest first from each
head, and every `STRIDE`-th commit that fits is kept, up to `PER_REPOSITORY`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "next_edit" / "tasks.jsonl"

# The repositories and the heads the records were drawn from: (GitHub name, commit, licence).
PINNED = {
    "pallets/click": ("2c8cd3ac958a7eb316d67f2d316c27086c4c0369", "BSD-3-Clause"),
    "psf/requests": ("1f6589ec3a1ee910f9a65cc3ceac60b26677bc0e", "Apache-2.0"),
    "python-attrs/attrs": ("c1dc5dcba16ed827aa6dcad896b41a3afedb4e32", "MIT"),
    "encode/httpx": ("ae1b9f66238f75ced3ced5e4485408435de10768", "BSD-3-Clause"),
}
PER_REPOSITORY = 10
STRIDE = 2  # every other fitting commit, so one burst of similar commits does not fill a repo
MIN_HUNKS, MAX_HUNKS = 2, 6
MAX_HUNK_LINES = 6  # lines removed or added by one hunk: a step of work, not a rewrite
MAX_LINE_CHARS = 120
# Where the next hunk may lie, in lines from the cursor's: what a region of 25 lines can reach.
NEXT_HUNK_ABOVE, NEXT_HUNK_BELOW = 8, 16
MAX_SPAN_LINES = 80  # from the first hunk to the last: one place of work
CONTEXT_LINES = 40  # lines of the file kept above the first hunk and below the last


@dataclass(frozen=True, slots=True)
class Hunk:
    """Lines [start, end) of the record's `base` (0-based) become `new`."""

    start: int
    end: int
    new: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Record:
    repo: str
    commit: str
    path: str
    base: tuple[str, ...]  # lines of the file before the commit, without their breaks
    hunks: tuple[Hunk, ...]  # top to bottom, none overlapping

    @property
    def key(self) -> str:
        return f"{self.repo}@{self.commit[:10]}:{self.path}"


@dataclass(frozen=True, slots=True)
class Step:
    """One document change of the history: lines [start, end) of the document as it stands
    become `new` (0-based), leaving the cursor at `cursor` (line, column)."""

    start: int
    end: int
    new: tuple[str, ...]
    cursor: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Task:
    """A document replayed from `opened` through `history`; `expected` is the document after
    the right next edit (`None`: nothing to do, the document stays as it is)."""

    key: str
    kind: str  # "edit" or "none"
    path: str
    opened: str
    history: tuple[Step, ...]
    expected: str | None

    @property
    def cursor(self) -> tuple[int, int]:
        return self.history[-1].cursor

    @property
    def document(self) -> str:
        """The document when the next edit is asked."""
        return apply_steps(self.opened, self.history)


def apply_steps(text: str, steps: Sequence[Step]) -> str:
    lines = text.split("\n")
    for step in steps:
        lines[step.start : step.end] = step.new
    return "\n".join(lines)


def tasks(path: Path = DATA) -> list[Task]:
    """Every record's edit task, then the nothing-to-do task of every other record."""
    records = [_record(json.loads(line)) for line in path.read_text().splitlines() if line]
    return [_edit_task(r) for r in records] + [_nothing_task(r) for r in records[::2]]


def _steps(record: Record, count: int) -> list[Step]:
    """The first `count` hunks as changes of the document as it stands after the ones before.
    A deletion leaves the cursor at the start of the line after it, or at the document's end
    when it deleted the last lines."""
    steps, shift = [], 0
    for hunk in record.hunks[:count]:
        start, end = hunk.start + shift, hunk.end + shift
        shift += len(hunk.new) - (hunk.end - hunk.start)
        last_line = len(record.base) + shift - 1
        cursor = (start + len(hunk.new) - 1, len(hunk.new[-1])) if hunk.new else (start, 0)
        if cursor[0] > last_line:
            cursor = (last_line, 0)
        steps.append(Step(start, end, hunk.new, cursor))
    return steps


def _edit_task(record: Record) -> Task:
    history = _steps(record, len(record.hunks) - 1)
    base = "\n".join(record.base)
    every = _steps(record, len(record.hunks))
    return Task(record.key, "edit", record.path, base, tuple(history), apply_steps(base, every))


def _nothing_task(record: Record) -> Task:
    base = "\n".join(record.base)
    return Task(
        record.key, "none", record.path, base, tuple(_steps(record, len(record.hunks))), None
    )


def _record(row: dict[str, object]) -> Record:
    hunks = row["hunks"]
    assert isinstance(hunks, list)
    return Record(
        str(row["repo"]),
        str(row["commit"]),
        str(row["path"]),
        tuple(str(row["base"]).split("\n")),
        tuple(Hunk(h["start"], h["end"], tuple(h["new"])) for h in hunks),
    )


# Rebuilding the records from the pinned commits


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def _hunks(before: list[str], after: list[str]) -> list[Hunk]:
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return [
        Hunk(i1, i2, tuple(after[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _fits(before: list[str], hunks: list[Hunk]) -> bool:
    if not MIN_HUNKS <= len(hunks) <= MAX_HUNKS:
        return False
    if hunks[-1].end - hunks[0].start > MAX_SPAN_LINES:
        return False
    for hunk in hunks:
        if hunk.end - hunk.start > MAX_HUNK_LINES or len(hunk.new) > MAX_HUNK_LINES:
            return False
        changed = [*before[hunk.start : hunk.end], *hunk.new]
        if any(len(line) > MAX_LINE_CHARS for line in changed):
            return False
        if not any(line.strip() for line in changed):
            return False  # blank lines only
    record = Record("", "", "", tuple(before), tuple(hunks))
    steps = _steps(record, len(hunks))
    cursor_line = steps[-2].cursor[0]
    target = steps[-1]
    return -NEXT_HUNK_ABOVE <= target.start - cursor_line <= NEXT_HUNK_BELOW


def _cut(before: list[str], hunks: list[Hunk]) -> tuple[list[str], list[Hunk]]:
    """The lines around the hunks, and the hunks in the cut's numbering."""
    first = max(0, hunks[0].start - CONTEXT_LINES)
    last = min(len(before), hunks[-1].end + CONTEXT_LINES)
    moved = [Hunk(h.start - first, h.end - first, h.new) for h in hunks]
    return before[first:last], moved


def _candidates(repo: Path, head: str) -> Iterator[tuple[str, str, list[str], list[Hunk]]]:
    log = _git(repo, "log", "--no-merges", "--format=@%H", "--name-status", head)
    for block in log.split("@")[1:]:
        commit, *files = [line for line in block.splitlines() if line]
        python = [f for f in files if f.endswith(".py")]
        if len(python) != 1:
            continue
        status, _, path = python[0].partition("\t")
        if status != "M" or path.startswith("docs/"):
            continue
        try:
            before = _git(repo, "show", f"{commit}^:{path}").split("\n")
            after = _git(repo, "show", f"{commit}:{path}").split("\n")
        except subprocess.CalledProcessError:
            continue
        hunks = _hunks(before, after)
        if _fits(before, hunks):
            yield commit, path, before, hunks


def build(clones: dict[str, Path]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for repo, clone in clones.items():
        kept = 0
        for index, (commit, path, before, hunks) in enumerate(_candidates(clone, PINNED[repo][0])):
            if index % STRIDE:
                continue
            base, moved = _cut(before, hunks)
            rows.append(
                {
                    "repo": repo,
                    "commit": commit,
                    "path": path,
                    "base": "\n".join(base),
                    "hunks": [{"start": h.start, "end": h.end, "new": list(h.new)} for h in moved],
                }
            )
            kept += 1
            if kept == PER_REPOSITORY:
                break
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=f"Rebuild {DATA.name} from pinned commits")
    parser.add_argument("clones", nargs="+", metavar="OWNER/NAME=CLONE", help="of each PINNED")
    args = parser.parse_args(argv)
    clones = {}
    for pair in args.clones:
        repo, _, clone = pair.partition("=")
        if repo not in PINNED or not clone:
            raise SystemExit(
                f"{pair}: give OWNER/NAME=CLONE, OWNER/NAME one of {', '.join(PINNED)}"
            )
        clones[repo] = Path(clone)
    rows = build(clones)
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(rows)} records, {DATA.stat().st_size // 1024} KB: {DATA}")


if __name__ == "__main__":
    main()


def chosen_tasks(limit: int) -> list[Task]:
    """Edit and nothing-to-do tasks interleaved, so `--warm` and `--limit` take both kinds."""
    every = tasks()
    edits = [t for t in every if t.kind == "edit"]
    nones = [t for t in every if t.kind == "none"]
    if limit:
        edits, nones = edits[:limit], nones[:limit]
    mixed: list[Task] = []
    for index in range(max(len(edits), len(nones))):
        mixed += edits[index : index + 1] + nones[index : index + 1]
    return mixed

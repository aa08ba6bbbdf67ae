"""Context beyond the file: what it adds to a keystroke, and what gathering costs off it.

The workspace is Python's own `email` package from the standard library (code nobody here
wrote). Ten of its modules are opened as tabs, the person edits and asks for suggestions at
seeded positions in `email/message.py` until the ring is full, and everything is gathered. Then,
at 2,000 seeded cursor positions, it times what a keystroke does anyway (the prompt window,
`build_completion_request`) and what context adds to it (`ContextStore.ranked` and the note of
the completion position), and prints the added time and its ratio to the window's. Gathering
itself (chunking, privacy judgement of every chunk, reading and parsing imported files) runs on
a worker thread after typing pauses; its time per document event is printed too. No peer: the
other designs (llama.vim's ring, Copilot's neighbouring tabs) run inside editors.

Usage: python -m bench.bench_context [--positions 2000] [--seed 7] [--chunk-lines 64]
       [--ring 16] [--budget 1024]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness.percentile import percentile
from lsp_server.cli.table import render_table
from lsp_server.config.model import RoutingConfig
from lsp_server.context.settings import ContextSettings
from lsp_server.context.store import ContextStore
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.suggest.prompt import build_completion_request

TABS = (
    "message.py",
    "utils.py",
    "header.py",
    "charset.py",
    "policy.py",
    "_policybase.py",
    "generator.py",
    "parser.py",
    "feedparser.py",
    "headerregistry.py",
)
CURRENT = "message.py"
TARGET_ADDED_MS = 1.0


def timed_ms(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    defaults = ContextSettings()
    parser.add_argument("--chunk-lines", type=int, default=defaults.chunk_lines)
    parser.add_argument("--ring", type=int, default=defaults.ring_chunks)
    parser.add_argument("--budget", type=int, default=1024, help="context_tokens")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    package = Path(sysconfig.get_paths()["stdlib"]) / "email"
    routing = RoutingConfig()
    settings = ContextSettings(chunk_lines=args.chunk_lines, ring_chunks=args.ring)
    store = ContextStore(PrivacyGuard(lambda: routing), settings)
    store.set_workspace_folders([package.parent.as_uri()])
    texts = {name: (package / name).read_text(encoding="utf-8") for name in TABS}
    uris = {name: (package / name).as_uri() for name in TABS}

    open_ms: list[float] = []
    edit_ms: list[float] = []
    for name in TABS:
        store.opened(uris[name], texts[name], "python")
        open_ms.append(timed_ms(store.gather_now))
    current, uri = texts[CURRENT], uris[CURRENT]
    lines = current.count("\n")
    for name in TABS:  # edits and suggestions around each tab fill the ring
        for _ in range(3):
            line = rng.randrange(texts[name].count("\n"))
            store.changed(uris[name], texts[name], "python", line)
            edit_ms.append(timed_ms(store.gather_now))

    offsets = [rng.randrange(len(current)) for _ in range(args.positions)]
    window_ms: list[float] = []
    added_ms: list[float] = []
    carried: list[int] = []
    for offset in offsets:
        request = None

        def build(offset: int = offset) -> None:
            nonlocal request
            request = build_completion_request(
                current, offset, language="python", path=uri, max_tokens=64
            )

        window_ms.append(timed_ms(build))
        assert request is not None
        window = (offset - len(request.prefix), offset + len(request.suffix))

        def add_context(offset: int = offset, window: tuple[int, int] = window) -> None:
            carried.append(len(store.ranked(uri, current, window, offset, args.budget)))
            store.completion_at(uri, current, "python", window)

        added_ms.append(timed_ms(add_context))
    store.clear()

    print(
        f"\ncontext store: {len(TABS)} tabs of the standard library's email package, "
        f"{args.positions} cursor positions in {CURRENT} ({lines} lines), ring of {args.ring} "
        f"chunks of {args.chunk_lines} lines, context_tokens = {args.budget}\n"
    )
    rows = [
        (
            "prompt window (done anyway)",
            f"{statistics.median(window_ms):.3f}",
            f"{percentile(window_ms, 0.95):.3f}",
            "1.00",
        ),
        (
            "context added (rank + note)",
            f"{statistics.median(added_ms):.3f}",
            f"{percentile(added_ms, 0.95):.3f}",
            f"{statistics.median(added_ms) / statistics.median(window_ms):.2f}",
        ),
    ]
    print(render_table(["per keystroke", "p50 ms", "p95 ms", "x window p50"], rows))
    gathering = [
        ("a tab opened (its imports read and parsed)", open_ms),
        ("an edit, once typing pauses", edit_ms),
    ]
    print("\ngathering, on the worker thread after typing pauses\n")
    print(
        render_table(
            ["event", "p50 ms", "max ms"],
            [(name, f"{statistics.median(v):.2f}", f"{max(v):.2f}") for name, v in gathering],
        )
    )
    print(f"\nchunks carried per request: median {statistics.median(carried):.0f}")
    added = statistics.median(added_ms)
    verdict = "met" if added <= TARGET_ADDED_MS else "not met"
    print(f"target: context adds at most {TARGET_ADDED_MS:.0f} ms at p50: {verdict}")


if __name__ == "__main__":
    main()

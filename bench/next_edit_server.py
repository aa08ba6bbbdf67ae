"""`gateway-ls` with the next-edit region and history bounds set from the command line, so that
bench_next_edit.py can compare sizes the settings do not expose; everything else is the real
server.

    python bench/next_edit_server.py LINES_BEFORE LINES_AFTER HISTORY_EDITS CONTEXT_LINES \
        rejoin|whole ahead|not-ahead serve --config ...
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lsp_server.cli.main import main
from lsp_server.nextedit import history, prompts, region, service


def sized(
    lines_before: int,
    lines_after: int,
    history_edits: int,
    context_lines: int,
    rejoin: bool,
    read_ahead: bool,
) -> None:
    service.editable_region = functools.partial(  # type: ignore[assignment]
        region.editable_region, lines_before=lines_before, lines_after=lines_after
    )
    history.HISTORY_MAX_EDITS = history_edits
    prompts.LOCAL_CONTEXT_LINES = context_lines  # the local model's view around the region
    prompts.LOCAL_REJOIN = rejoin  # the local model ends a region once it copies the rest
    if not read_ahead:  # the local model reads a prepared prompt only when asked
        service.NextEditService._read_ahead_locally = lambda self, call: None  # type: ignore[method-assign]


if __name__ == "__main__":
    before, after, edits, context, answer, ahead, *rest = sys.argv[1:]
    sized(int(before), int(after), int(edits), int(context), answer == "rejoin", ahead == "ahead")
    raise SystemExit(main(rest))

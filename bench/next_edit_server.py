"""`gateway-ls` with the next-edit region and history bounds set from the command line, so that
bench_next_edit.py can compare sizes the settings do not expose; everything else is the real
server.

    python -m bench.next_edit_server LINES_BEFORE LINES_AFTER HISTORY_EDITS CONTEXT_LINES \
        rejoin|whole ahead|not-ahead serve --config ...
"""

from __future__ import annotations

import functools
import sys
from unittest import mock

from lsp_server.backends.base import EditCall
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
    # Each name is patched in the module that reads it (`service` and `prompts` import theirs).
    vars(service)["editable_region"] = functools.partial(
        region.editable_region, lines_before=lines_before, lines_after=lines_after
    )
    history.HISTORY_MAX_EDITS = history_edits
    vars(prompts)["LOCAL_CONTEXT_LINES"] = context_lines  # the local model's view of the region
    prompts.LOCAL_REJOIN = rejoin  # the local model ends a region once it copies the rest
    if not read_ahead:  # the local model reads a prepared prompt only when asked
        mock.patch.object(service.NextEditService, "_read_ahead_locally", _no_read_ahead).start()


def _no_read_ahead(self: service.NextEditService, call: EditCall) -> None:
    """In place of `NextEditService._read_ahead_locally`."""


if __name__ == "__main__":
    before, after, edits, context, answer, ahead, *rest = sys.argv[1:]
    sized(int(before), int(after), int(edits), int(context), answer == "rejoin", ahead == "ahead")
    raise SystemExit(main(rest))

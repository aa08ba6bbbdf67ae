"""`gateway-ls` with the next-edit region and history bounds set from the command line, so that
bench_next_edit.py can compare sizes the settings do not expose; everything else is the real
server.

    python -m bench.next_edit_server LINES_BEFORE LINES_AFTER HISTORY_EDITS CONTEXT_LINES \
        rejoin|whole ahead|not-ahead VERDICTS|- serve --config ...

With a VERDICTS file, each proposed edit the filter judges adds a line to it: the filter's
verdict at every `routing.edit_eagerness` level (JSON, the level's reason to drop it or null),
so that one prediction is scored at every level.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import get_args
from unittest import mock

from lsp_server.backends.base import EditCall
from lsp_server.cli.main import main
from lsp_server.config.model import EditEagerness
from lsp_server.nextedit import edit_filter, history, prompts, region, service
from lsp_server.nextedit.request import EditRequest
from lsp_server.text_edits import OffsetEdit

_verdict = edit_filter.EditFilter.verdict


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


def record_verdicts(path: Path) -> None:
    def every_level(
        self: edit_filter.EditFilter,
        request: EditRequest,
        edits: Sequence[OffsetEdit],
        eagerness: EditEagerness,
    ) -> str | None:
        """In place of `EditFilter.verdict`: the verdict at each level, written down."""
        verdicts = {
            level: _verdict(self, request, edits, level) for level in get_args(EditEagerness)
        }
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(verdicts) + "\n")
        return verdicts[eagerness]

    mock.patch.object(edit_filter.EditFilter, "verdict", every_level).start()


if __name__ == "__main__":
    before, after, edits, context, answer, ahead, verdicts, *rest = sys.argv[1:]
    sized(int(before), int(after), int(edits), int(context), answer == "rejoin", ahead == "ahead")
    if verdicts != "-":
        record_verdicts(Path(verdicts))
    raise SystemExit(main(rest))

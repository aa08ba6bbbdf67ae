"""`python -m docgen DIR`: writes the reference pages into DIR (`docs/reference` for the site)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from docgen.command_line import command_line_page
from docgen.configuration import configuration_page
from docgen.lsp_methods import lsp_page
from docgen.reasons import reasons_page

PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": configuration_page,
    "command-line.md": command_line_page,
    "lsp.md": lsp_page,
    "reasons.md": reasons_page,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m docgen DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, page in PAGES.items():
        (out / name).write_text(page(), encoding="utf-8")
    print(f"wrote {len(PAGES)} reference pages into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

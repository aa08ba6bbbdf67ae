"""The command-line reference, from the argument parser (`cli.main.build_parser`)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from docgen.markdown import GENERATED, code, table
from lsp_server.cli.main import build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(
            action, argparse._SubParsersAction | argparse._HelpAction
        ):
            continue
        metavar = action.metavar if isinstance(action.metavar, str) else None
        name = ", ".join(action.option_strings) or metavar or action.dest
        if action.option_strings and action.nargs != 0:
            name += f" {metavar or action.dest.upper()}"
        words = action.help or ""
        if action.choices and not isinstance(action.choices, dict):
            words += " (" + ", ".join(str(c) for c in action.choices) + ")"
        rows.append((code(name), words))
    return rows


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for name, sub in _subcommands(parser).items():
        path = f"{prefix} {name}"
        yield path, _help_of(parser, name), sub
        yield from _commands(sub, path)


def command_line_page(parser: argparse.ArgumentParser | None = None) -> str:
    parser = parser or build_parser()
    parts = [
        "# Command line\n\n",
        GENERATED,
        f"\n{parser.description}\n\n",
        "Exit codes: 0 ok, 2 bad usage or bad configuration, 1 anything else. "
        "See [The command line](../command-line.md).\n\n",
        f"```\n{parser.format_usage().strip()}\n```\n\n",
        table(("option", "meaning"), _options(parser)),
    ]
    for path, words, sub in _commands(parser, parser.prog):
        parts.append(f"\n## `{path}`\n\n{words}\n\n```\n{sub.format_usage().strip()}\n```\n\n")
        rows = _options(sub)
        if rows:
            parts.append(table(("option", "meaning"), rows))
    return "".join(parts)

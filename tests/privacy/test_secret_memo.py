"""`SecretMemo`: block by block, it finds what a scan of the whole prompt finds, and after an
edit or a move it rescans only the blocks that changed.

Secret values are assembled at run time from pieces, as in `test_privacy`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import pairwise

import pytest

import lsp_server.privacy.secret_memo as secret_memo
from lsp_server.privacy.secret_memo import SecretMemo, blocks
from lsp_server.privacy.secret_rules import first_secret

pytestmark = pytest.mark.unit

PASSWORD = "Zq8vK2" + "mW9xLp4"
# Secrets over one, two and three lines, each with what the whole scan calls it.
SECRETS = [
    ("password-assignment", f'DB_PASSWORD = "{PASSWORD}"'),
    ("name-value-pair", f"- name: DB_PASSWORD\n  value: {PASSWORD}"),
    ("password-assignment", f"db_password: |\n  {PASSWORD}"),
    ("netrc-password", f"machine example.com\n  login me\n  password {PASSWORD}"),
    (
        "block-secret",
        'variable "db_password" {\n  description = "main"\n  type = string\n'
        f'  sensitive = true\n  default = "{PASSWORD}"\n}}',
    ),
]


def code_lines(count: int, seed: int = 3) -> list[str]:
    """Ordinary lines of varied length, so block ends fall in different places."""
    rng = random.Random(seed)
    words = ["value", "total", "items", "result", "compute", "index", "count", "name"]
    lines = []
    for number in range(count):
        picked = " + ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
        lines.append(f"    line_{number} = {picked or 'None'}" if number % 9 else "")
    return lines


def split_at_line(lines: list[str], line: int, column: int = 4) -> tuple[str, str]:
    text = "\n".join(lines)
    cursor = sum(len(each) + 1 for each in lines[:line]) + column
    return text[:cursor], text[cursor:]


class ScanCounter:
    """Counts the scans the memo runs and the characters they read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scans = 0
        self.characters = 0
        monkeypatch.setattr(secret_memo, "first_secret", self._scan)

    def _scan(self, text: str, start: int = 0) -> object:
        self.scans += 1
        self.characters += len(text)
        return first_secret(text, start)

    def reset(self) -> None:
        self.scans = self.characters = 0


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScanCounter]:
    yield ScanCounter(monkeypatch)


def test_blocks_cover_every_line_once_in_order() -> None:
    lines = [line.encode() for line in code_lines(400)]
    spans = list(blocks(lines))
    assert spans[0][0] == 0 and spans[-1][1] == len(lines) - 1
    assert all(first <= last for first, last in spans)
    assert all(previous[1] + 1 == following[0] for previous, following in pairwise(spans))
    assert 8 < len(spans) < len(lines) / 2  # blocks, neither one nor a line each


def test_blocks_end_where_the_content_says_not_where_the_text_starts() -> None:
    lines = [line.encode() for line in code_lines(400)]
    ends = {last for _, last in blocks(lines)}
    shifted = {last + 30 for _, last in blocks(lines[30:])}
    assert ends & shifted == {end for end in ends if end >= 30}
    assert not any(lines[end] == b"" for end in ends - {len(lines) - 1})  # never a blank line


@pytest.mark.parametrize(("kind", "secret"), SECRETS)
def test_a_secret_anywhere_in_the_text_is_found_wherever_the_cursor_is(
    kind: str, secret: str
) -> None:
    base = code_lines(120)
    memo = SecretMemo()  # one memo throughout, as for one document
    for at in range(0, len(base), 3):
        lines = base[:at] + secret.split("\n") + base[at:]
        for cursor_line in (0, len(lines) // 2, len(lines) - 1, at):
            prefix, suffix = split_at_line(lines, cursor_line)
            assert first_secret(prefix + suffix) is not None
            assert memo.first_secret_kind(prefix, suffix) == kind, (at, cursor_line)


def test_clean_text_stays_clean_as_the_cursor_walks_it() -> None:
    lines = code_lines(300)
    memo = SecretMemo()
    for cursor_line in range(len(lines)):
        assert memo.first_secret_kind(*split_at_line(lines, cursor_line)) is None


def test_an_edit_far_from_the_cursor_is_seen(counter: ScanCounter) -> None:
    lines = code_lines(200)
    memo = SecretMemo()
    assert memo.first_secret_kind(*split_at_line(lines, 150)) is None
    lines[20] = f'    token = "{PASSWORD}"'  # a secret pasted far above the cursor
    counter.reset()
    assert memo.first_secret_kind(*split_at_line(lines, 150)) == "password-assignment"
    assert counter.characters < 1500  # the lines around the cursor and the edited block


def test_a_block_named_when_its_value_is_already_there_is_seen() -> None:
    """The block's name typed last, four lines above its value, in every place relative to
    the blocks and with the cursor on the name's line or far below."""
    base = code_lines(150)
    block = SECRETS[-1][1].split("\n")
    for at in range(10, 100, 7):
        for cursor_line in (at, 140):
            memo = SecretMemo()
            lines = [*base[:at], 'variable "region" {', *block[1:], *base[at:]]
            assert memo.first_secret_kind(*split_at_line(lines, cursor_line)) is None
            lines[at] = block[0]
            found = memo.first_secret_kind(*split_at_line(lines, cursor_line))
            assert found == "block-secret", (at, cursor_line)


@pytest.mark.parametrize("edited", ["name", "value"])
def test_a_secret_completed_across_a_line_break_by_an_edit_is_seen(edited: str) -> None:
    """A name on one line and its value on the next: either half typed last, and the line
    break falling in every place relative to the blocks."""
    base = code_lines(150)
    for at in range(10, 100, 7):
        memo = SecretMemo()
        lines = [*base[:at], "- name: DB_PASSWORD", f"  value: {PASSWORD}", *base[at:]]
        half = at if edited == "name" else at + 1
        typed, lines[half] = lines[half], "  # to do"
        assert memo.first_secret_kind(*split_at_line(lines, 140)) is None
        lines[half] = typed
        assert memo.first_secret_kind(*split_at_line(lines, 140)) == "name-value-pair", at


def test_typing_on_a_line_rescans_only_the_lines_around_it(counter: ScanCounter) -> None:
    lines = code_lines(200)
    memo = SecretMemo()
    memo.first_secret_kind(*split_at_line(lines, 100))
    for typed in "abcdef":
        lines[100] += typed
        counter.reset()
        assert memo.first_secret_kind(*split_at_line(lines, 100, len(lines[100]))) is None
        assert counter.scans == 1  # two lines either side of the cursor's


def test_moving_to_the_next_line_rescans_the_edges_not_the_text(counter: ScanCounter) -> None:
    lines = code_lines(400)
    memo = SecretMemo()
    memo.first_secret_kind(*split_at_line(lines[0:200], 100))
    whole = len("\n".join(lines[0:200]))
    for step in range(1, 20):
        counter.reset()
        window = lines[step : 200 + step]  # the window moves with the cursor
        assert memo.first_secret_kind(*split_at_line(window, 100)) is None
        assert counter.characters < whole / 2


def test_a_window_opened_elsewhere_is_scanned_whole_once(counter: ScanCounter) -> None:
    lines = code_lines(300)
    memo = SecretMemo()
    memo.first_secret_kind(*split_at_line(lines, 150))
    assert counter.scans == 3  # the lines around the cursor, the text before, the text after


def test_a_private_key_block_is_judged_whole() -> None:
    body = "\n".join(
        "".join(random.Random(i).choices("ABCDEFabcdef0123456789+/", k=64)) for i in range(30)
    )
    key = "-----BEGIN RSA PRIV" + f"ATE KEY-----\n{body}\n-----END RSA PRIV" + "ATE KEY-----"
    lines = [*code_lines(40), *key.split("\n"), *code_lines(40)]
    assert SecretMemo().first_secret_kind(*split_at_line(lines, 75)) == "private-key"


def test_what_is_remembered_stays_within_capacity() -> None:
    memo = SecretMemo(capacity=8)
    lines = code_lines(400)
    for cursor_line in range(0, 400, 5):
        memo.first_secret_kind(*split_at_line(lines, cursor_line))
    assert len(memo._verdicts) <= 8

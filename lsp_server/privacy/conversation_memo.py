"""Secret scanning for a conversation that grows turn by turn.

An agent sends its whole conversation with every turn: the instructions, the tools, every
earlier message and tool result, then the new ones. Judging all of it again each turn costs
milliseconds on a 40 KB conversation; what is new is usually a few hundred bytes.

A conversation is a sequence of texts. It is judged in two runs: the texts joined by line
breaks (each read apart) and run together (a secret split across two of them is still one).
Once a conversation is found clean, the digest of its texts is remembered. A later request
whose first texts have a remembered digest (a whole earlier conversation, or the opening
texts every session of an agent repeats) is judged from there: the new texts, with the end
of what was judged before as context (a secret that begins in the old text and ends in the
new). A finding that ends inside the old text is not counted: that text was judged clean with
all its context, and a finding there comes only from the context cut short.

The digests are chained (each covers every text before it), so a changed earlier message
changes every digest after it and the conversation is judged from that message on. The texts
a client's next request begins with as its last one did are compared with them instead of
digested again. Memos are kept per client and bounded, and a client's remembered verdicts
never answer another client's request. A text that may hold a private key block (which
spans any number of lines) has the whole conversation judged.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from lsp_server.privacy.block_secrets import BLOCK_REACH
from lsp_server.privacy.secret_memo import MULTI_LINE_MARKER
from lsp_server.privacy.secret_rules import first_secret, first_secret_ending_after

# A rule reads at most `_REACH` lines either way of where a secret begins, and a block's name
# up to `BLOCK_REACH` lines above its value (see `secret_memo`): findings on the last `_REACH`
# lines of the old text and the new one's first line are counted, read with that many lines
# more before them.
_REACH = 2
_LINES_BEFORE = _REACH + max(_REACH, BLOCK_REACH)
# On long lines: twice the longest single-line secret the rules know (the guard's margin).
_CHARS_BEFORE = 8192
# SHA-256, cut to 16 bytes: where the processor computes it (x86's SHA extensions, ARMv8's),
# twice as fast as BLAKE2b, and a new session digests its whole conversation (40 KB).
_DIGEST_BYTES = 16
_OPENING_TEXTS = 2
# A client's last conversation is kept to compare its next with, up to this size: an agent
# sends the same instructions every turn, and comparing them costs a tenth of digesting them.
_LAST_KEPT_CHARS = 256 * 1024
_ENCODING, _ERRORS = "utf-8", "surrogatepass"


class ConversationMemo:
    """The kind of the first secret in a conversation, remembering the conversations each
    client sent that were clean."""

    def __init__(self, *, clients: int = 64, conversations: int = 4096) -> None:
        self._clients = clients
        self._conversations = conversations
        self._clean: OrderedDict[str, OrderedDict[bytes, None]] = OrderedDict()
        # Each client's last conversation (`_LAST_KEPT_CHARS` at most) and its digests.
        self._last: dict[str, tuple[Sequence[str], list[bytes]]] = {}

    def first_secret_kind(self, client: str, texts: Sequence[str]) -> str | None:
        """The kind of the first secret in `texts`, read apart and run together, or None."""
        digests = self._digests(client, texts)
        known = self._known(client)
        judged = next((n for n in range(len(texts), 0, -1) if digests[n - 1] in known), 0)
        if judged == len(texts):
            known.move_to_end(digests[-1])
            return None
        apart, together = "\n".join(texts), "".join(texts)
        # The marker holds no line break, so one in `apart` is in `together` too.
        if MULTI_LINE_MARKER in together:
            judged = 0
        old = texts[:judged]
        old_chars = sum(map(len, old))
        kind = _new_secret_kind(apart, old_chars + len(old) - 1 if old else 0) or _new_secret_kind(
            together, old_chars
        )
        if kind is None:
            # The conversation, and its first texts: what every session of an agent begins
            # with (its instructions, its tools), so a new session is judged from there.
            for digest in {*digests[:_OPENING_TEXTS], digests[-1]}:
                known[digest] = None
            while len(known) > self._conversations:
                known.popitem(last=False)
        return kind

    def remembered(self) -> int:
        """How many conversations are remembered clean, over all clients."""
        return sum(map(len, self._clean.values()))

    def _known(self, client: str) -> OrderedDict[bytes, None]:
        known = self._clean.get(client)
        if known is None:
            known = self._clean[client] = OrderedDict()
            if len(self._clean) > self._clients:
                removed, _ = self._clean.popitem(last=False)
                self._last.pop(removed, None)
        else:
            self._clean.move_to_end(client)
        return known

    def _digests(self, client: str, texts: Sequence[str]) -> list[bytes]:
        """`_chained_digests(texts)`; the texts the client's last conversation began with too
        are compared with it, not digested again (equal texts, equal digests)."""
        last_texts, last_digests = self._last.get(client, ((), []))
        same = 0
        for text, last in zip(texts, last_texts, strict=False):
            if text != last:
                break
            same += 1
        digests = _chained_digests(texts[same:], last_digests[:same])
        if sum(map(len, texts)) <= _LAST_KEPT_CHARS:
            self._last[client] = (tuple(texts), digests)
        else:
            self._last.pop(client, None)
        return digests


def _chained_digests(texts: Sequence[str], before: list[bytes]) -> list[bytes]:
    """For each text, a digest of it and of every text before it (with their lengths, so the
    same characters cut otherwise give another digest), after `before`, the digests of the
    texts that come first."""
    digests = before
    digest = digests[-1] if digests else b""
    for text in texts:
        encoded = text.encode(_ENCODING, _ERRORS)
        hasher = hashlib.sha256(digest)
        hasher.update(len(encoded).to_bytes(8, "little"))
        hasher.update(encoded)
        digest = hasher.digest()[:_DIGEST_BYTES]
        digests.append(digest)
    return digests


def _new_secret_kind(text: str, judged: int) -> str | None:
    """The kind of the first secret in `text` that ends on the last lines of its start already
    judged clean (`text[:judged]`) or after them; a few lines more before are read as context.

    A finding on those last lines is counted too: it may hold only because of what now
    follows it (a token that a new character lengthens, a value whose quote now closes)."""
    if judged == 0:
        finding = first_secret(text)
        return finding.kind if finding is not None else None
    starts = _line_starts_before(text, judged, _LINES_BEFORE + 1)
    start, counted_from = starts[-1], starts[_REACH]
    finding = first_secret_ending_after(text[start:], counted_from - start)
    return finding.kind if finding is not None else None


def _line_starts_before(text: str, position: int, lines: int) -> list[int]:
    """Where the line holding `position` starts, and the `lines - 1` lines before it; at most
    `_CHARS_BEFORE` back (a line longer than that is cut there)."""
    floor = max(0, position - _CHARS_BEFORE)
    starts = []
    end = position
    for _ in range(lines):
        newline = text.rfind("\n", floor, end)
        starts.append(floor if newline == -1 else newline + 1)
        if newline == -1:
            break
        end = newline
    return starts + [starts[-1]] * (lines - len(starts))

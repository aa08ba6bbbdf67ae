"""What a keystroke costs the local model, predicted from its calibrated speed.

A warm keystroke finds its prompt in the KV cache but for the text typed since
(`MiddleAnchor`): a token or two, read in one decode each as a generated token is (a read that
short is no batch, so the calibrated prompt speed says nothing of it). Then the model writes
its line. A line done before `more_lines_seconds` grows by more lines until then, and one
still under way then is dropped (`LineTime`): a fast model's keystroke takes about that long
whatever its speed, a slow one's as long as its line.

The first keystroke in a document finds little of its prompt read ahead: its prompt is cut to
what the pace reads in time (`pace`, `prompt_fit`), but never below `MIN_READ_TOKENS` new
tokens, which it reads at prompt speed before it writes its line. Where those alone take the
deadline the cut cannot help, and the keystroke shows a fragment of a line or nothing.

But a person reads a document for a while before typing in it, and the model reads the prompt
ahead meanwhile (`local.read_ahead`). A model that reads a document's whole prompt within
`READ_BEFORE_TYPING_S` answers the first keystroke people actually make as it answers a warm
one; one that needs longer answers it with a cut prompt, as above.
bench/README.md ("A keystroke, predicted and measured") holds the figures behind each number.
"""

from __future__ import annotations

from lsp_server.backends.local.calibration import Speed
from lsp_server.backends.local.completion_text import more_lines_seconds

# Prompt tokens a warm keystroke reads past the KV cache: the typed character's token (the
# median of the bench's keystrokes, every preset).
READ_TOKENS = 1
# A line's tokens, its line break included: the median of bench_quality's masked lines after
# their first character, in Qwen2.5-Coder's tokens (Gemma's: 12, whose keystroke the line time
# bounds anyway).
LINE_TOKENS = 10
# A long line's tokens: the 90th percentile of bench_quality's masked first lines after their
# first character, with the line break (13 Qwen2.5-Coder tokens), and one to spare. A keystroke
# whose prompt must be cut plans its reading around it, so that nine lines in ten end in time (a
# line the deadline cuts shows nothing): after a 3 s read, 0 % empty first keystrokes against
# 32.5 % planned around the median line (bench/README.md).
LONG_LINE_TOKENS = 14
# The fewest new prompt tokens a keystroke reads when the KV cache lacks its prompt: below it a
# suggestion has too little to go on.
MIN_READ_TOKENS = 32
# How long a document is read before the first keystroke in it: the shorter of the two reads
# `bench_quality --first` measures (3 s and 10 s).
READ_BEFORE_TYPING_S = 3.0
# A document's prompt at its first keystroke, in tokens: the mean over bench_prompt_reuse's 40
# cold tasks at the cursor (Gemma 516, Qwen2.5-Coder 0.5B 538), rounded up.
PROMPT_TOKENS = 540


def line_s(speed: Speed) -> float:
    """Reading the typed token and writing a line: the part of a keystroke that follows the
    machine's speed."""
    return (READ_TOKENS + LINE_TOKENS) / speed.generation_tps


def warm_keystroke_s(speed: Speed, deadline_ms: int) -> float:
    """A whole warm keystroke: its line, or the line time when the line is done sooner."""
    reading_s = READ_TOKENS / speed.generation_tps
    return max(line_s(speed), reading_s + more_lines_seconds(deadline_ms))


def first_keystroke_s(speed: Speed) -> float:
    """A document's first keystroke when the least it reads is all it can afford: those tokens
    at prompt speed, then its line."""
    return MIN_READ_TOKENS / speed.prompt_tps + line_s(speed)


def prompt_read_s(speed: Speed) -> float:
    """Reading a document's whole prompt ahead, at prompt speed."""
    return PROMPT_TOKENS / speed.prompt_tps


def first_keystroke_after_reading_s(speed: Speed, deadline_ms: int, *, read_ahead: bool) -> float:
    """A document's first keystroke after `READ_BEFORE_TYPING_S` of reading: a warm one where
    the prompt was read by then, else the cut one (`first_keystroke_s`)."""
    if read_ahead and prompt_read_s(speed) <= READ_BEFORE_TYPING_S:
        return warm_keystroke_s(speed, deadline_ms)
    return first_keystroke_s(speed)

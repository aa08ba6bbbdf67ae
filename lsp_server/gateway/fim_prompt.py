"""Fill-in-the-middle prompts that arrive with the model's FIM tokens already in them.

Zed's OpenAI-compatible edit-prediction provider (and other FIM clients written for one model
family) send no `suffix`: they put prefix and suffix inside `prompt` between the markers of a
`prompt_format`. Every FIM `prompt_format` Zed offers is read: `qwen` and `code_gemma` (same
markers), `star_coder` (also what `infer` falls back to), `deepseek_coder`, `code_llama`,
`codestral` and `glm`. (`zeta`, `zeta2` and `zeta2.1` are next-edit prompts that ask for a
rewritten region, not a fill-in-the-middle: the gateway recognises them by their markers and
answers them as next edits, `gateway/edit_completions.py`.) The gateway chooses the
model itself, so it splits the prompt back into prefix and suffix and lets each backend format
them its own way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FimFormat:
    name: str
    pattern: re.Pattern[str]  # named groups `prefix` and `suffix`


def _prefix_suffix_middle(name: str, prefix: str, suffix: str, middle: str) -> FimFormat:
    p, s, m = (re.escape(marker) for marker in (prefix, suffix, middle))
    return FimFormat(name, re.compile(rf"{p}(?P<prefix>.*?){s}(?P<suffix>.*){m}\s?\Z", re.DOTALL))


# Text before the prefix marker (repository context such as `<|file_sep|>` sections) is in a
# model-specific format no other backend could use, so it is dropped.
FIM_FORMATS: tuple[FimFormat, ...] = (
    _prefix_suffix_middle("qwen", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    _prefix_suffix_middle("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    _prefix_suffix_middle("deepseek", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    # Code Llama: `<PRE> {prefix} <SUF>{suffix} <MID>`; the spaces belong to the format.
    FimFormat(
        "codellama",
        re.compile(r"<PRE> ?(?P<prefix>.*?) ?<SUF>(?P<suffix>.*?) ?<MID>\s?\Z", re.DOTALL),
    ),
    _prefix_suffix_middle("glm", "<|code_prefix|>", "<|code_suffix|>", "<|code_middle|>"),
    # Codestral (Mistral): `[SUFFIX]{suffix}[PREFIX]{prefix}`, suffix first, no middle marker.
    FimFormat(
        "codestral", re.compile(r"\[SUFFIX\](?P<suffix>.*?)\[PREFIX\](?P<prefix>.*)\Z", re.DOTALL)
    ),
)


@dataclass(frozen=True, slots=True)
class FimParts:
    prefix: str
    suffix: str
    format: str


def split_fim_prompt(prompt: str) -> FimParts | None:
    """Prefix and suffix of a prompt in one of `FIM_FORMATS`; None for a plain prompt."""
    for fim_format in FIM_FORMATS:
        match = fim_format.pattern.search(prompt)
        if match is not None:
            return FimParts(match["prefix"], match["suffix"], fim_format.name)
    return None

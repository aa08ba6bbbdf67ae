"""Zed's Zeta 2 and Zeta 2.1 prompts and its reading of their answers, ported line for line
from zed-industries/zed so that the gateway's tests replay what Zed itself sends:

- `crates/edit_prediction/src/zeta.rs`: `prompt_format` `zeta2` / `zeta2.1` (or `infer` from a
  model named so) picks `ZetaFormat::V0211SeedCoder` / `V0318SeedMultiRegions`; the prompt is
  `format_zeta_prompt(..) + get_prefill(..)` (empty for both), sent by
  `open_ai_compatible::send_custom_server_request` as a `RawCompletionRequest`
  (`model`, `prompt`, `max_tokens` = 4 × `max_output_tokens`, `temperature: null`, `stop` =
  `stop_tokens_for_format`, `environment: null`) to the configured `api_url`; the answer's
  `choices[0].text` goes through `parse_zeta2_model_output`, then the old and new regions both
  get a final line break and are diffed (`compute_edits_and_cursor_position`).
- `crates/zeta_prompt/src/seed_coder.rs`: `assemble_fim_prompt`, `build_suffix_section`,
  `build_cursor_prefix_section`, the markers and `END_MARKER`.
- `crates/zeta_prompt/src/zeta_prompt.rs`: `write_event`, `format_edit_history_within_budget`
  (the last 6 events), `format_related_files_within_budget`, `build_v0318_cursor_prefix`,
  `parse_zeta2_model_output`.
- `crates/zeta_prompt/src/multi_region.rs`: `compute_marker_offsets_v0318` (blocks of 6 to 16
  lines), `write_editable_with_markers_v0318`, `apply_marker_span_v0318`, `V0318_END_MARKER`.

The token budgets (4096 tokens less a tenth) cut nothing from these small prompts and are left
out.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

FIM_SUFFIX = "<[fim-suffix]>"
FIM_PREFIX = "<[fim-prefix]>"
FIM_MIDDLE = "<[fim-middle]>"
FILE_MARKER = "<filename>"
START_MARKER = "<<<<<<< CURRENT\n"
SEPARATOR = "=======\n"
END_MARKER = ">>>>>>> UPDATED\n"
CURSOR_MARKER = "<|user_cursor|>"
V0318_END_MARKER = "<[end▁of▁sentence]>"
MAX_EDIT_EVENTS = 6
_TAG = re.compile(r"<\|marker_(\d+)\|>")


@dataclass(frozen=True)
class Event:
    path: str
    diff: str  # hunks, ending with a line break
    predicted: bool = False


@dataclass(frozen=True)
class RelatedFile:
    path: str
    text: str


@dataclass(frozen=True)
class PromptInput:
    """`Zeta2PromptInput` resolved to its context: the excerpt the prompt shows, the editable
    range in it and the cursor's offset."""

    cursor_path: str
    context: str
    editable: tuple[int, int]
    cursor: int
    events: tuple[Event, ...] = ()
    related_files: tuple[RelatedFile, ...] = ()


def request_body(
    prompt: str, model: str, max_output_tokens: int, stop: list[str]
) -> dict[str, object]:
    """`RawCompletionRequest` as serde writes it."""
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_output_tokens * 4,
        "temperature": None,
        "stop": stop,
        "environment": None,
    }


def format_v0211(prompt_input: PromptInput) -> str:
    context = prompt_input.context
    start, end = prompt_input.editable
    cursor = prompt_input.cursor
    section = f"{FILE_MARKER}{prompt_input.cursor_path}\n"
    section += context[:start] + START_MARKER + context[start:cursor] + CURSOR_MARKER
    section += context[cursor:end]
    if not section.endswith("\n"):
        section += "\n"
    return _assemble(prompt_input, section + SEPARATOR)


def format_v0318(prompt_input: PromptInput) -> str:
    context = prompt_input.context
    start, end = prompt_input.editable
    section = f"{FILE_MARKER}{prompt_input.cursor_path}\n" + context[:start]
    editable = context[start:end]
    cursor = prompt_input.cursor - start
    offsets = marker_offsets_v0318(editable)
    placed = False
    for i, offset in enumerate(offsets):
        section += f"<|marker_{i + 1}|>"
        if i + 1 < len(offsets):
            block = editable[offset : offsets[i + 1]]
            if not placed and offset <= cursor <= offsets[i + 1]:
                placed = True
                section += block[: cursor - offset] + CURSOR_MARKER + block[cursor - offset :]
            else:
                section += block
    if not section.endswith("\n"):
        section += "\n"
    return _assemble(prompt_input, section)


def _assemble(prompt_input: PromptInput, cursor_section: str) -> str:
    suffix = FIM_SUFFIX + prompt_input.context[prompt_input.editable[1] :]
    if not suffix.endswith("\n"):
        suffix += "\n"
    history = ""
    events = prompt_input.events[-MAX_EDIT_EVENTS:]
    if events:
        history = f"{FILE_MARKER}edit_history\n" + "".join(_event(e) for e in events)
    related = ""
    for file in prompt_input.related_files:
        related += f"{FILE_MARKER}{file.path}\n{file.text}"
        if not related.endswith("\n"):
            related += "\n"
    prompt = suffix + FIM_PREFIX
    if related:
        prompt += related + "\n"
    if history:
        prompt += history + "\n"
    return prompt + cursor_section + FIM_MIDDLE


def _event(event: Event) -> str:
    head = "// User accepted prediction:\n" if event.predicted else ""
    return f"{head}--- a/{event.path}\n+++ b/{event.path}\n{event.diff}"


def marker_offsets_v0318(text: str, min_lines: int = 6, max_lines: int = 16) -> list[int]:
    """`compute_marker_offsets_with_limits`."""
    if not text:
        return [0, 0]
    lines = []  # (start, is_blank, is_good_start)
    offset = 0
    for line in text.split("\n"):
        trimmed = line.strip()
        blank = not trimmed
        lines.append((offset, blank, not blank and not _structural_tail(trimmed)))
        offset += len(line) + 1
    if text.endswith("\n") and len(lines) > 1:
        lines.pop()

    def good_start(start: int) -> int | None:
        return next((i for i in range(start, min(len(lines), start + 5)) if lines[i][2]), None)

    offsets = [0]
    last = 0
    i = 0
    while i < len(lines):
        gap = i - last
        if gap >= min_lines and not lines[i][1] and i > 0 and lines[i - 1][1]:
            found = good_start(i)
            target = found if found is not None else i
            if len(lines) - target >= min_lines and lines[target][0] > offsets[-1]:
                offsets.append(lines[target][0])
                last, i = target, target + 1
                continue
        if gap >= max_lines:
            found = good_start(i)
            target = found if found is not None else i
            if lines[target][0] > offsets[-1]:
                offsets.append(lines[target][0])
                last, i = target, target + 1
                continue
        i += 1
    if offsets[-1] != len(text):
        offsets.append(len(text))
    return offsets


def _structural_tail(trimmed: str) -> bool:
    if trimmed.startswith(("}", "]", ")")):
        return True
    return trimmed.rstrip(";") in ("break", "continue", "return", "throw", "end")


def parse_v0211(output: str, old_editable: str) -> str:
    """`parse_zeta2_model_output` for V0211SeedCoder: the end marker stripped, the rest is
    the new region (the cursor marker taken out)."""
    output = output.removesuffix(END_MARKER)
    return output.replace(CURSOR_MARKER, "", 1)


def parse_v0318(output: str, old_editable: str) -> str:
    """`parse_zeta2_model_output` for V0318SeedMultiRegions (`apply_marker_span_v0318`)."""
    output = output.removesuffix(V0318_END_MARKER)
    tags = list(_TAG.finditer(output))
    if len(tags) < 2:
        raise ValueError("expected at least two marker tags")
    first, last = int(tags[0].group(1)), int(tags[-1].group(1))
    if first == last:
        return old_editable
    offsets = marker_offsets_v0318(old_editable)
    start, end = offsets[first - 1], offsets[last - 1]
    if start > end:
        raise ValueError("start marker must come before end marker")
    new = "".join(output[a.end() : b.start()] for a, b in itertools.pairwise(tags))
    return (old_editable[:start] + new + old_editable[end:]).replace(CURSOR_MARKER, "", 1)


def zed_region_after(new_region: str) -> str:
    """What `request_prediction_with_zeta` compares: a final line break added when missing."""
    return new_region if not new_region or new_region.endswith("\n") else new_region + "\n"

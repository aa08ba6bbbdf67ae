"""Next-edit requests as the clients' own sources build them: Continue's Mercury prompt and
Zed's Zeta prompts (its first form here, Zeta 2 and 2.1 through `zed_zeta2`), for one rename in
`scale.py`, and Zed's reading of the answer."""

from __future__ import annotations

from tests.support import zed_zeta2

KEY_ENV = {"INCEPTION_API_KEY": "test-key"}
BEFORE = "def scale(amount, factor):\n"
REGION = "    result = value * factor\n    return result"
RENAMED = "    result = amount * factor\n    return result"
AFTER = "\n\nprint(scale(2, 3))"
HISTORY = (
    "--- scale.py\n+++ scale.py\n@@ -1,3 +1,3 @@\n-def scale(value, factor):\n"
    "+def scale(amount, factor):\n     result = value * factor\n     return result"
)


def continue_user_message() -> str:
    """As Continue's template renders it: snippets, the file with the region and cursor, the
    diff history (core/nextEdit/templating/NextEditPromptEngine.ts, mercuryCoderNextEdit.ts)."""
    current = (
        BEFORE
        + "<|code_to_edit|>\n"
        + REGION.replace("value", "<|cursor|>value", 1)
        + "\n<|/code_to_edit|>"
        + AFTER
    )
    snippet = (
        "<|recently_viewed_code_snippet|>\ncode_snippet_file_path: util.py\n"
        "def helper():\n    return 1\n<|/recently_viewed_code_snippet|>"
    )
    return (
        f"<|recently_viewed_code_snippets|>\n{snippet}\n<|/recently_viewed_code_snippets|>\n\n"
        f"<|current_file_content|>\ncurrent_file_path: scale.py\n{current}\n"
        "<|/current_file_content|>\n\n"
        f"<|edit_diff_history|>\n{HISTORY}\n<|/edit_diff_history|>\n"
    )


def zed_clean(output: str) -> str:
    """Zed's `clean_zeta1_model_output`, the cursor marker dropped."""
    content = output.replace("<|user_cursor_is_here|>", "")
    start = content.find("<|editable_region_start|>")
    start = 0 if start < 0 else start + len("<|editable_region_start|>")
    if content[start : start + 1] == "\n":
        start += 1
    end = content.find("<|editable_region_end|>")
    end = len(content) if end < 0 else end
    if end > 0 and content[end - 1] == "\n":
        end -= 1
    return content[start:end]


def zeta_prompt() -> str:
    """As `zeta_prompt::zeta1::format_zeta1_from_input` writes it."""
    instruction = (
        "### Instruction:\nYou are a code completion assistant and your task is to analyze user "
        "edits and then rewrite an excerpt that the user provides, suggesting the appropriate "
        "edits within the excerpt, taking into account the cursor location.\n\n### User Edits:\n\n"
    )
    events = (
        "User edited scale.py:\n```diff\n@@ -1,3 +1,3 @@\n-def scale(value, factor):\n"
        "+def scale(amount, factor):\n     result = value * factor\n     return result\n```"
    )
    excerpt = (
        "```scale.py\n<|start_of_file|>\n"
        + BEFORE
        + "<|editable_region_start|>\n"
        + REGION.replace("value", "<|user_cursor_is_here|>value", 1)
        + "\n<|editable_region_end|>"
        + AFTER
        + "\n```"
    )
    return instruction + events + "\n\n### User Excerpt:\n\n" + excerpt + "\n\n### Response:\n"


# Zeta 2 and 2.1: the same rename, with the region as Zed's excerpt ranges give it (whole
# lines, the last line's break included). Zeta 2.1's region reaches two more functions, so
# its markers cut it into blocks and the answer rewrites the first block alone.
ZETA2_REGION = REGION + "\n"
ZETA21_REGION = (
    REGION
    + "\n\n\ndef shift(amount, offset):\n    moved = amount + offset\n    return moved\n\n\n"
    + "def clamp(amount, low, high):\n    if amount < low:\n        return low\n"
    + "    if amount > high:\n        return high\n    return amount\n"
)
ZETA2_EVENT = zed_zeta2.Event(
    "scale.py",
    "@@ -1,3 +1,3 @@\n-def scale(value, factor):\n+def scale(amount, factor):\n"
    "     result = value * factor\n     return result\n",
)
ZETA2_RELATED = zed_zeta2.RelatedFile("util.py", "def helper():\n    return 1\n")


def zeta2_input(region: str) -> zed_zeta2.PromptInput:
    """Zed's prompt input for the rename: the cursor before `value` in the region."""
    context = BEFORE + region + AFTER[1:] + "\n"
    start = len(BEFORE)
    return zed_zeta2.PromptInput(
        cursor_path="scale.py",
        context=context,
        editable=(start, start + len(region)),
        cursor=start + region.index("value"),
        events=(ZETA2_EVENT,),
        related_files=(ZETA2_RELATED,),
    )

"""Drafting a next edit's tokens from its prompt: the draft follows the copy under way, finds
it again after the model's own tokens, ahead of the last place copied from first. (With the
real model, that the drafted answer is the greedy one: test_local_backend.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest

from bench.harness.permits import permit_for
from lsp_server.backends.base import ChatMessage, CompletionRequest, EditCall, Usage
from lsp_server.backends.local.backend import LocalBackend
from lsp_server.backends.local.copy_decoding import PromptLookup
from lsp_server.backends.model_presets import QWEN_CODER_0_5B
from lsp_server.config.model import LocalConfig
from lsp_server.nextedit.chat_format import read_chat_answer
from tests.support.real_tools import require_preset

# A prompt as token ids: an instruction (1, 2), then a region (10 ... 17) that holds the run
# (12, 13) twice, then a closing (3).
PROMPT = [1, 2, 10, 11, 12, 13, 14, 15, 12, 13, 16, 17, 3]


def test_nothing_is_drafted_before_a_run_of_the_prompt_is_written() -> None:
    lookup = PromptLookup(PROMPT)
    lookup.wrote([10])
    assert lookup.draft(4) == []  # one token is too little to say where the copy is


def test_the_draft_continues_the_copy_under_way() -> None:
    lookup = PromptLookup(PROMPT)
    written = [10, 11]
    lookup.wrote(written)
    assert lookup.draft(3) == [12, 13, 14]
    for token in (12, 13, 14):
        written.append(token)
        lookup.wrote(written)
    assert lookup.draft(3) == [15, 12, 13]


def test_after_a_token_of_its_own_the_copy_is_found_again_ahead_of_the_last() -> None:
    lookup = PromptLookup(PROMPT)
    written = [10, 11, 12, 13, 14, 15]
    for end in range(2, len(written) + 1):
        lookup.wrote(written[:end])
    written += [99, 12, 13]  # an edit, then the region again
    for end in range(len(written) - 2, len(written) + 1):
        lookup.wrote(written[:end])
    # (12, 13) is in the region twice: the copy resumes at the one after the last copied.
    assert lookup.draft(2) == [16, 17]


def test_a_run_found_only_behind_the_last_copy_is_taken_from_its_last_place() -> None:
    lookup = PromptLookup(PROMPT)
    written = [14, 15, 12, 13, 16]
    for end in range(2, len(written) + 1):
        lookup.wrote(written[:end])
    written += [10, 11]
    lookup.wrote(written)
    assert lookup.draft(2) == [12, 13]


def test_a_draft_stops_at_the_prompts_end() -> None:
    lookup = PromptLookup(PROMPT)
    lookup.wrote([16, 17])
    assert lookup.draft(5) == [3]


# A next edit's call as the chat format asks it: a region to write out again. (A copy: where
# the model weighs two tokens alike, decodes of other widths may tip it either way.)
CODE = '''import math


def area_of_circle(radius: float) -> float:
    """The area of a circle of the given radius."""
    return math.pi * radius**2


def circumference(radius: float) -> float:
    return 2 * math.pi * radius
'''
EDIT_CALL = EditCall(
    "",
    (
        ChatMessage(
            "system",
            "Reply with the code the user gives as it is, in one fenced code block.",
        ),
        ChatMessage("user", f"```python\n{CODE}```"),
    ),
    max_tokens=200,
)


@pytest.fixture(scope="module")
def coder() -> Iterator[LocalBackend]:
    """The smallest preset asked for next edits: its chat template is its own (the bundled
    model has none, and answers through llama-cpp-python's chat completion)."""
    require_preset(QWEN_CODER_0_5B)
    backend = LocalBackend(
        LocalConfig(model=QWEN_CODER_0_5B.name, n_threads=1, deadline_ms=600_000)
    )
    asyncio.run(backend.ensure_loaded())
    yield backend
    asyncio.run(backend.aclose())


@pytest.mark.model
async def test_a_next_edit_is_the_greedy_chat_answer_written_in_fewer_decodes(
    coder: LocalBackend,
) -> None:
    chat = "".join(
        [piece async for piece in coder.chat(EDIT_CALL.as_chat(), permit=permit_for(coder))]
    )
    usage = Usage()
    edit = "".join(
        [piece async for piece in coder.edit(EDIT_CALL, usage, permit=permit_for(coder))]
    )

    assert edit == chat
    assert edit.startswith("```python\n") and "def circumference(" in edit  # written out
    assert coder.copying.tokens == usage.completion_tokens > 40
    assert coder.copying.kept > 0
    assert coder.copying.decodes < coder.copying.tokens / 2  # several tokens a decode


@pytest.mark.model
async def test_a_keystroke_stops_a_next_edit_under_way(coder: LocalBackend) -> None:
    """One worker serves both: a keystroke must not queue behind seconds of a region being
    written out. The edit stops where it was (its cut region is dropped upstream) and the
    keystroke is answered."""
    edit = coder.edit(EDIT_CALL, Usage(), permit=permit_for(coder))
    written = await anext(edit)  # the edit is writing
    keystroke = asyncio.create_task(
        collect_text(
            coder.complete(
                CompletionRequest(prefix=KEYSTROKE, suffix="\n", max_tokens=6),
                permit=permit_for(coder),
            )
        )
    )
    async for piece in edit:
        written += piece

    assert "def circumference(" not in written  # stopped before the region was written out
    assert (await keystroke).strip()  # and the keystroke answered


KEYSTROKE = CODE + "\n\ndef diameter(radius: float) -> float:\n    return "


async def collect_text(pieces: AsyncIterator[str]) -> str:
    return "".join([piece async for piece in pieces])


@pytest.mark.model
async def test_a_next_edit_on_every_core_writes_the_same_and_leaves_the_configured_threads(
    coder: LocalBackend,
) -> None:
    import llama_cpp

    llm = coder._llm
    assert llm is not None
    answers = []
    for cores in (1, 2):
        coder._edit_cores = cores
        llm.reset()  # each reads its whole prompt
        answers.append(
            "".join(
                [piece async for piece in coder.edit(EDIT_CALL, Usage(), permit=permit_for(coder))]
            )
        )
        assert llama_cpp.llama_n_threads(llm.ctx) == 1  # a keystroke after it: one thread

    assert answers[0] == answers[1]
    assert "def circumference(" in answers[1]


@pytest.mark.model
async def test_a_keystroke_between_two_next_edits_costs_neither_its_prompt(
    coder: LocalBackend,
) -> None:
    """The one KV cache serves both: each finds its prompt where the other ran in between
    (`edit_cache`), and the edit writes the same answer from a cache put back."""
    keystroke = CompletionRequest(prefix=KEYSTROKE, suffix="\n", max_tokens=4)
    await collect_text(coder.complete(keystroke, permit=permit_for(coder)))
    first = await collect_text(coder.edit(EDIT_CALL, Usage(), permit=permit_for(coder)))
    edit_prompt = coder.last_prompt_tokens

    await collect_text(coder.complete(keystroke, permit=permit_for(coder)))
    keystroke_prompt = coder.last_prompt_tokens
    assert coder.last_reused_tokens >= keystroke_prompt - 1  # put back after the edit
    again = await collect_text(coder.edit(EDIT_CALL, Usage(), permit=permit_for(coder)))

    assert coder.last_reused_tokens == edit_prompt - 1  # kept aside through the keystroke
    assert again == first


@pytest.mark.model
async def test_a_next_edit_read_ahead_is_found_read_and_the_keystrokes_prompt_put_back(
    coder: LocalBackend,
) -> None:
    """Offline, a next edit's prompt is read while typing pauses (`prefill_edit`): the request
    that comes reads none of it again, and the keystroke after the pause finds its own."""
    keystroke = CompletionRequest(prefix=KEYSTROKE, suffix="\n", max_tokens=4)
    await collect_text(coder.complete(keystroke, permit=permit_for(coder)))
    keystroke_prompt = coder.last_prompt_tokens
    coder._edit_saved = None  # no next edit's prompt kept from before

    assert coder.prefill_edit(EDIT_CALL)
    await coder.wait_idle()
    await collect_text(coder.complete(keystroke, permit=permit_for(coder)))
    assert coder.last_reused_tokens >= keystroke_prompt - 1  # put back after the read-ahead
    answer = await collect_text(coder.edit(EDIT_CALL, Usage(), permit=permit_for(coder)))

    assert coder.last_reused_tokens == coder.last_prompt_tokens - 1  # all read ahead
    assert "def circumference(" in answer


@pytest.mark.model
async def test_a_region_rewritten_ends_once_it_copies_the_rest(coder: LocalBackend) -> None:
    """The model copies the code it was given; the region it is said to rewrite differs from it
    in the first line, so the answer changes a line, then copies: it ends there, and the rest of
    the region completes it, fence and all."""
    region = CODE.rstrip("\n").replace("import math", "import cmath")
    whole_usage, usage = Usage(), Usage()
    whole = await collect_text(coder.edit(EDIT_CALL, whole_usage, permit=permit_for(coder)))
    rejoined_before = coder.copying.rejoined
    answer = await collect_text(
        coder.edit(replace(EDIT_CALL, rewrites=region), usage, permit=permit_for(coder))
    )

    assert coder.copying.rejoined == rejoined_before + 1
    assert read_chat_answer(answer) == CODE.rstrip("\n")  # its first line, then the region's
    assert "def circumference(" in whole
    assert usage.completion_tokens < whole_usage.completion_tokens / 2


@pytest.mark.model
async def test_a_next_edits_request_lets_the_read_ahead_of_its_prompt_finish(
    coder: LocalBackend,
) -> None:
    """The request for the prompt being read ahead runs after that reading instead of stopping
    it (a read stopped inside a step loses the step); any other request stops it."""
    other = replace(EDIT_CALL, messages=(*EDIT_CALL.messages[:1], ChatMessage("user", KEYSTROKE)))
    for call, kept in ((EDIT_CALL, True), (other, False)):
        coder._edit_saved = None
        assert coder._llm is not None
        coder._llm.reset()
        assert coder.prefill_edit(EDIT_CALL)
        await collect_text(
            coder.edit(call, Usage(), permit=permit_for(coder))
        )  # asked at once, as the reading starts
        read_ahead = coder.last_reused_tokens
        assert (read_ahead == coder.last_prompt_tokens - 1) is kept, (call, read_ahead)

"""Each endpoint's call for a next edit, in its `edit_format`, and its answer read back."""

from __future__ import annotations

from dataclasses import replace

from lsp_server.backends.base import EditCall
from lsp_server.config.model import EditFormat, EndpointConfig
from lsp_server.config.providers import edit_format, edit_path
from lsp_server.nextedit import (
    chat_format,
    mercury_format,
    sweep_format,
    zeta2_format,
    zeta_format,
)
from lsp_server.nextedit.region import CONTEXT_LINES, LOCAL_CONTEXT_LINES, context_window
from lsp_server.nextedit.request import EditRequest

# The local model stops writing a region once its answer, after a change, copies the rest
# (`backends/local/rejoin.py`): on bench_next_edit's first 20 tasks 19 answers the same (edit
# similarity −0.9 [−2.6, 0]), and an edit asked again 2.43 s against 3.47 s where it left lines
# to copy (bench/README.md, "Toward the budget"). A chat endpoint writes its answer its own
# way: its call carries no region to stop at.
LOCAL_REJOIN = True


def format_of(endpoint: EndpointConfig | None) -> EditFormat:
    """The local model (None) answers in the chat format."""
    return "chat" if endpoint is None else edit_format(endpoint)


def edit_call(request: EditRequest, endpoint: EndpointConfig | None) -> EditCall:
    form = format_of(endpoint)
    path = "" if endpoint is None else edit_path(endpoint)
    max_tokens = request.answer_cap
    if form == "zeta":
        context = context_window(request.text, request.region, zeta_format.ZETA_CONTEXT_LINES)
        prompt = zeta_format.zeta_prompt(request, context)
        return EditCall(path, prompt=prompt, max_tokens=max_tokens, stop=zeta_format.STOP)
    if form == "zeta2":
        context = context_window(request.text, request.region, CONTEXT_LINES)
        prompt = zeta2_format.zeta2_prompt(request, context)
        return EditCall(path, prompt=prompt, max_tokens=max_tokens, stop=zeta2_format.STOP)
    lines = LOCAL_CONTEXT_LINES if endpoint is None else CONTEXT_LINES
    if endpoint is None:
        request = replace(request, snippets=())
    context = context_window(request.text, request.region, lines)
    if form == "sweep":
        prompt = sweep_format.sweep_prompt(request, context)
        return EditCall(path, prompt=prompt, max_tokens=max_tokens, stop=sweep_format.STOP)
    if form == "mercury":
        messages = mercury_format.mercury_messages(request, context)
        return EditCall(path, messages, max_tokens=max_tokens)
    messages = chat_format.chat_messages(request, context)
    rewrites = request.region_text if endpoint is None and LOCAL_REJOIN else None
    return EditCall(path, messages, max_tokens=max_tokens, rewrites=rewrites)


def read_answer(form: EditFormat, answer: str) -> str | None:
    """The rewritten region of an answer in `form`; None: no edit proposed. ValueError: the
    answer is malformed."""
    match form:
        case "zeta":
            return zeta_format.read_zeta_answer(answer)
        case "zeta2":
            return zeta2_format.read_zeta2_answer(answer)
        case "sweep":
            return sweep_format.read_sweep_answer(answer)
        case "mercury":
            return mercury_format.read_mercury_answer(answer)
        case _:
            return chat_format.read_chat_answer(answer)

"""Fuzzed LSP input: broken frames, unknown methods, wrong params, positions that do not fit.

Each example starts the real server over stdio and writes a generated sequence of messages to it,
well-formed and not. The server must answer every request it can read with exactly one response
(an error where the request is wrong), ignore what it cannot read, stay up, and keep its copy of
the document equal to a reference built from the changes it could read.

The reference decodes each `didChange` with pygls' own converter and applies it with pygls'
`TextDocument` (UTF-16 positions, incremental sync): out-of-range positions are clamped the way
the server's library clamps them, so what is checked is that exactly the readable changes, in
order, and nothing else reached the server's document.

Every broken frame ends in a line break: pygls reads headers line by line, so the bytes of a
frame it could not use end up in one junk line it skips, and the next frame is read whole.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import endpoint_toml
from tests.support.raw_lsp import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    RawLspClient,
    frame,
    raw_lsp_server,
)
from tests.support.report import report_scenario

pytestmark = pytest.mark.slow

EXAMPLES = 20
MESSAGES_PER_EXAMPLE = 250  # at most 5,000 messages in all
MAX_UINTEGER = 2**31 - 1
START_TEXT = "a🐍b🐍c\nline two é\n\n    indented 🐍🐍\nlast"
PIECES = ["a", "b", " ", "\n", "é", "🐍", "x", "\t", "\r\n"]
CONVERTER = default_converter()


# --- what goes on the wire -----------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What the server owes for one generated message."""

    request: bool = False  # a request in a readable frame: exactly one response
    errors: frozenset[int] = frozenset()  # the error codes that response may carry
    result_allowed: bool = True
    null_id_error: bool = False  # an unreadable id: one error response with id null


def error_expected(*codes: int) -> Expect:
    return Expect(request=True, errors=frozenset(codes), result_allowed=False)


def result_expected(*codes: int) -> Expect:
    return Expect(request=True, errors=frozenset(codes))


@dataclass
class Sent:
    data: bytes
    msg_id: Any = None
    expect: Expect = field(default_factory=Expect)
    change: dict[str, Any] | None = None  # a readable didChange message, for the reference
    malformed: bool = False


Render = Callable[[str, str], Sent]  # (document uri, request id) -> what to send


def message_bytes(message: Any) -> bytes:
    return frame(json.dumps(message).encode("utf-8"))


def decodes(message: dict[str, Any], message_type: type) -> bool:
    try:
        CONVERTER.structure(message, message_type)
    except Exception:
        return False
    return True


def request(method: str, params: Any, msg_id: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


# --- strategies ----------------------------------------------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.just(MAX_UINTEGER + 1),
    st.just(1.5),
    st.text(max_size=3),
    st.just([]),
    st.just({}),
)
positions = st.fixed_dictionaries(
    {
        "line": st.one_of(st.integers(0, 6), st.just(MAX_UINTEGER)),
        "character": st.one_of(st.integers(0, 14), st.just(MAX_UINTEGER)),
    }
)
inserted = st.lists(st.sampled_from(PIECES), max_size=4).map("".join)
partial_change = st.fixed_dictionaries(
    {"range": st.fixed_dictionaries({"start": positions, "end": positions}), "text": inserted}
)
content_change = st.one_of(
    partial_change, partial_change, st.builds(lambda t: {"text": t}, inserted)
)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """`value` with one member, at any depth, replaced by a JSON value of another kind."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        replaced = dict(value)
        if draw(st.integers(0, 4)) == 0:
            del replaced[key]
        else:
            replaced[key] = draw(mutated(value[key]))
        return replaced
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(mutated(value[index])), *value[index + 1 :]]
    return draw(json_leaf)


def did_change_params(uri: str, changes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"textDocument": {"uri": uri, "version": 2}, "contentChanges": changes}


@st.composite
def did_change(draw: st.DrawFn) -> Render:
    changes = draw(st.lists(content_change, min_size=1, max_size=2))
    mutate = draw(st.integers(0, 5)) == 0
    other_document = draw(st.integers(0, 9)) == 0
    mutation = draw(mutated(did_change_params("URI", changes))) if mutate else None

    def render(uri: str, msg_id: str) -> Sent:
        target = f"{uri}-never-opened" if other_document else uri
        params = did_change_params(target, changes) if mutation is None else mutation
        if mutation is not None:
            params = json.loads(json.dumps(params).replace('"URI"', json.dumps(uri)))
        message = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}
        return Sent(message_bytes(message), change=message, malformed=mutation is not None)

    return render


def inline_params(uri: str, position: dict[str, Any]) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": position, "context": {"triggerKind": 2}}


@st.composite
def inline_request(draw: st.DrawFn) -> Render:
    position = draw(positions)
    mutation = draw(st.one_of(st.none(), mutated(inline_params("URI", position))))

    def render(uri: str, msg_id: str) -> Sent:
        params = inline_params(uri, position)
        if mutation is not None:
            params = json.loads(json.dumps(mutation).replace('"URI"', json.dumps(uri)))
        message = request("textDocument/inlineCompletion", params, msg_id)
        if decodes(message, types.InlineCompletionRequest):
            expect = result_expected(REQUEST_CANCELLED)  # a newer request may supersede it
        else:
            expect = error_expected(INVALID_PARAMS)
        return Sent(message_bytes(message), msg_id, expect, malformed=mutation is not None)

    return render


@st.composite
def unknown_method(draw: st.DrawFn) -> Render:
    name = "fuzz/" + draw(st.text(alphabet="abc/$.", max_size=6))
    params = draw(st.one_of(st.none(), json_leaf, st.just({"a": 1})))
    notification = draw(st.booleans())

    def render(uri: str, msg_id: str) -> Sent:
        if notification:
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": name}
            if params is not None:
                message["params"] = params
            return Sent(message_bytes(message), malformed=True)
        expect = error_expected(METHOD_NOT_FOUND)
        return Sent(message_bytes(request(name, params, msg_id)), msg_id, expect, malformed=True)

    return render


@st.composite
def execute_command(draw: st.DrawFn) -> Render:
    command = draw(st.sampled_from(["gatewayLs.status", "gatewayLs.nothing", ""]))
    arguments = draw(st.one_of(st.none(), st.lists(json_leaf, max_size=2)))

    def render(uri: str, msg_id: str) -> Sent:
        params: dict[str, Any] = {"command": command}
        if arguments is not None:
            params["arguments"] = arguments
        known = command == "gatewayLs.status"
        expect = result_expected() if known else error_expected(INVALID_PARAMS)
        message = request("workspace/executeCommand", params, msg_id)
        return Sent(message_bytes(message), msg_id, expect, malformed=not known)

    return render


@st.composite
def odd_envelope(draw: st.DrawFn) -> Render:
    """Valid JSON that is not a usable JSON-RPC 2.0 message."""
    kind = draw(st.sampled_from(["no-version", "old-version", "bad-id", "not-object", "cancel"]))
    junk = draw(json_leaf)

    def render(uri: str, msg_id: str) -> Sent:
        params = inline_params(uri, {"line": 0, "character": 0})
        if kind == "no-version":
            message: Any = {"id": msg_id, "method": "textDocument/inlineCompletion"}
            expect = error_expected(INVALID_REQUEST)
            return Sent(message_bytes(message), msg_id, expect, malformed=True)
        if kind == "old-version":
            message = {**request("textDocument/inlineCompletion", params, msg_id), "jsonrpc": "1"}
            expect = error_expected(INVALID_REQUEST, INVALID_PARAMS)
            return Sent(message_bytes(message), msg_id, expect, malformed=True)
        if kind == "bad-id":
            message = request("fuzz/bad-id", None, [msg_id])
            return Sent(message_bytes(message), None, Expect(null_id_error=True), malformed=True)
        if kind == "cancel":
            message = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": junk}}
            return Sent(message_bytes(message), malformed=True)
        return Sent(message_bytes([junk]), malformed=True)

    return render


@st.composite
def broken_frame(draw: st.DrawFn) -> Render:
    """A frame the server cannot read, carrying a change or request that must not take effect."""
    kind = draw(
        st.sampled_from(["short", "long", "zero", "bad-json", "lowercase", "binary", "no-header"])
    )
    excess = draw(st.integers(1, 40))
    garbage = draw(st.binary(max_size=30).filter(lambda b: b"Content-Length" not in b))
    carries_request = draw(st.booleans())
    cut = draw(st.integers(1, 20))

    def render(uri: str, msg_id: str) -> Sent:
        if carries_request:
            message = request("workspace/executeCommand", {"command": "gatewayLs.status"}, msg_id)
        else:
            start = {"line": 0, "character": 0}
            change = {"range": {"start": start, "end": start}, "text": "LOST"}
            params = did_change_params(uri, [change])
            message = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}
        body = json.dumps(message).encode()
        if kind == "short":
            data = b"Content-Length: %d\r\n\r\n%s" % (max(1, len(body) - cut), body)
        elif kind == "long":
            data = b"Content-Length: %d\r\n\r\n%s%s" % (len(body) + excess, body, b"#" * excess)
        elif kind == "zero":
            data = b"Content-Length: 0\r\n\r\n" + body
        elif kind == "bad-json":
            broken = body[:-1] + b"," + garbage.replace(b"\n", b" ")
            data = b"Content-Length: %d\r\n\r\n%s" % (len(broken), broken)
        elif kind == "lowercase":
            data = b"content-length: %d\r\n\r\n%s" % (len(body), body)
        elif kind == "binary":
            data = garbage
        else:
            data = body
        return Sent(data + b"\r\n", malformed=True)

    return render


@st.composite
def junk_headers(draw: st.DrawFn) -> Render:
    """Junk lines and extra headers around a good frame: the frame must still be read."""
    junk = draw(st.text(alphabet="xyz: -", max_size=12))
    inner = draw(inline_request())

    def render(uri: str, msg_id: str) -> Sent:
        sent = inner(uri, msg_id)
        length_line, _, rest = sent.data.partition(b"\r\n")
        extra = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        data = junk.encode() + b"\r\n" + length_line + b"\r\n" + extra + rest
        return Sent(data, sent.msg_id, sent.expect, malformed=True)

    return render


messages = st.one_of(
    did_change(),
    did_change(),
    did_change(),
    inline_request(),
    inline_request(),
    unknown_method(),
    execute_command(),
    odd_envelope(),
    broken_frame(),
    broken_frame(),
    junk_headers(),
)


# --- the reference -------------------------------------------------------------------------


class ReferenceDocument:
    """The text the server should hold: readable changes applied as pygls applies them."""

    def __init__(self, uri: str, text: str) -> None:
        self.uri = uri
        self.document = TextDocument(
            uri,
            source=text,
            sync_kind=types.TextDocumentSyncKind.Incremental,
            position_codec=PositionCodec(types.PositionEncodingKind.Utf16),
        )

    def apply(self, message: dict[str, Any]) -> None:
        try:
            notification = CONVERTER.structure(message, types.DidChangeTextDocumentNotification)
        except Exception:
            return  # unreadable: the server drops it whole
        if notification.params.text_document.uri != self.uri:
            return
        for change in notification.params.content_changes:
            self.document.apply_change(change)

    @property
    def text(self) -> str:
        return self.document.source


def end_position(text: str) -> dict[str, int]:
    last_line = text.rsplit("\n", 1)[-1]
    return {"line": text.count("\n"), "character": len(last_line.encode("utf-16-le")) // 2}


# --- one session ---------------------------------------------------------------------------


@dataclass
class Tally:
    messages: int = 0
    malformed: int = 0


def fuzz_config(endpoint: FakeLLMServer) -> str:
    routing = (
        "[routing]\ninline_deadline_ms = 4000\nhedge_after_ms = 3500\nredact_secrets = false\n"
    )
    return routing + "[local]\nenabled = false\n" + endpoint_toml("fast", endpoint.base_url)


async def fuzz_session(
    workdir: Path, endpoint: FakeLLMServer, renders: list[Render], example: int, tally: Tally
) -> None:
    async with raw_lsp_server(workdir, config_text=fuzz_config(endpoint)) as client:
        uri = (workdir / "fuzz me é.py").as_uri()
        client.open_document(uri, START_TEXT)
        reference = ReferenceDocument(uri, START_TEXT)
        sent: list[Sent] = []
        for index, render in enumerate(renders):
            item = render(uri, f"fuzz-{example}-{index}")
            client.write_raw(item.data)
            await client.drain()
            if item.change is not None:
                reference.apply(item.change)
            sent.append(item)
        tally.messages += len(sent)
        tally.malformed += sum(item.malformed for item in sent)

        await check_answers(client, sent)
        assert client.process.returncode is None, "the server exited"
        status = await client.status()
        assert status["endpoints"][0]["name"] == "fast"
        await check_document(client, endpoint, reference, example)


async def check_answers(client: RawLspClient, sent: list[Sent]) -> None:
    owed = [item for item in sent if item.expect.request]
    nulls = sum(item.expect.null_id_error for item in sent)
    answered = await client.wait_for(
        lambda: (
            all(client.responses(i.msg_id) for i in owed) and len(client.responses(None)) >= nulls
        ),
        timeout_s=30,
    )
    assert answered, [i.data for i in owed if not client.responses(i.msg_id)][:3]
    await asyncio.sleep(0.2)  # room for a duplicate to show up
    for item in owed:
        (response,) = client.responses(item.msg_id)
        if "error" in response:
            assert response["error"]["code"] in item.expect.errors, (item.data, response)
        else:
            assert item.expect.result_allowed, (item.data, response)
    null_errors = client.responses(None)
    assert len(null_errors) == nulls and all("error" in r for r in null_errors), null_errors
    owed_ids = {item.msg_id for item in owed}
    stray = [i for i in client.response_ids() if str(i).startswith("fuzz-") and i not in owed_ids]
    assert not stray, f"answers to frames the server could not have read: {stray}"


async def check_document(
    client: RawLspClient, endpoint: FakeLLMServer, reference: ReferenceDocument, example: int
) -> None:
    """Append a unique last line, then read the server's text back from the prompt it sends."""
    marker = f"# end of example {example}"
    position = end_position(reference.text)
    message = {
        "jsonrpc": "2.0",
        "method": "textDocument/didChange",
        "params": did_change_params(
            reference.uri, [{"range": {"start": position, "end": position}, "text": marker}]
        ),
    }
    client.send(message)
    reference.apply(message)
    response = await client.request(
        "textDocument/inlineCompletion",
        inline_params(reference.uri, end_position(reference.text)),
    )
    assert "result" in response, response
    prompts = [r.json for r in endpoint.requests if r.json and marker in r.json.get("prompt", "")]
    assert prompts, "the final request never reached the endpoint"
    assert prompts[-1]["prompt"] + prompts[-1]["suffix"] == reference.text


def test_fuzzed_lsp_input_is_answered_and_survived(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tally = Tally()
    examples = itertools.count()
    with FakeLLMServer(Behaviour(text="ok\n")) as endpoint:

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=(Phase.explicit, Phase.generate),  # no shrinking: each run starts a server
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.data_too_large,
                HealthCheck.large_base_example,
            ],
        )
        @given(
            st.lists(messages, min_size=MESSAGES_PER_EXAMPLE // 2, max_size=MESSAGES_PER_EXAMPLE)
        )
        def run(renders: list[Render]) -> None:
            example = next(examples)
            workdir = tmp_path_factory.mktemp(f"fuzz{example}")
            asyncio.run(fuzz_session(workdir, endpoint, renders, example, tally))

        run()

    assert tally.messages <= EXAMPLES * MESSAGES_PER_EXAMPLE
    report_scenario(
        "fuzzed LSP input",
        requests=tally.messages,
        failures_survived=tally.malformed,
        bytes_leaked=None,
        memory_growth_mb=None,
    )

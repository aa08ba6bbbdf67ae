"""End to end: refactor on request, over stdio, against loopback model endpoints.

The real server is driven as VS Code would drive it: code actions on a selection, then
`gatewayLs.refactor` with work-done progress, answered by `workspace/applyEdit`. The endpoints are
`FakeLLMServer`s speaking the OpenAI and the Anthropic API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.edit_client import (
    apply_workspace_edit,
    read_code_actions_whole,
    record_applied_edits,
)
from tests.support.lsp_session import (
    endpoint_toml,
    eventually,
    insert_text,
    lsp_session,
    open_document,
    server_status,
)
from tests.support.refactor_session import (
    AREA_BODY,
    CIRCLE,
    INSTRUCTION,
    REFACTOR_ROLE,
    REFACTORED,
    assert_refactored,
    chat_prompt,
    messages_of,
    range_json,
    refactor,
    refactor_config,
    refactor_params,
)

ANTHROPIC_KEY_ENV = "GATEWAY_LS_TEST_ANTHROPIC_KEY"
# Built at run time so that no scanner mistakes this file for a leaked key.
PLANTED_AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
REQUEST_CANCELLED = -32800

# The model answers at the left margin, with prose around the code, as chat models do.
ANSWER = (
    "Here is the simplified method body:\n\n"
    "```python\n"
    "return math.pi * self.r ** 2\n"
    "```\n\n"
    "It drops the temporary variable and squares with `**`.\n"
)


def anthropic_config(name: str, server: FakeLLMServer) -> str:
    return LOCAL_OFF + (
        f'[[endpoints]]\nname = "{name}"\nkind = "anthropic"\nbase_url = "{server.root_url}"\n'
        f'model = "claude-test"\napi_key_env = "{ANTHROPIC_KEY_ENV}"\nroles = {REFACTOR_ROLE}\n'
    )


async def status(client: LanguageClient) -> dict[str, Any]:
    return await asyncio.wait_for(server_status(client), 10)


def refactor_progress(client: LanguageClient) -> list[Any]:
    reports = [
        values for token, values in client.progress_reports.items() if "refactor" in str(token)
    ]
    assert len(reports) == 1, client.progress_reports
    return reports[0]


async def test_code_actions_on_a_selection_and_none_without_one(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=ANSWER)) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            read_code_actions_whole(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            def ask(selection: types.Range) -> Any:
                return client.text_document_code_action_async(
                    types.CodeActionParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        range=selection,
                        context=types.CodeActionContext(diagnostics=[]),
                    )
                )

            actions = await ask(AREA_BODY)
            assert actions and all(isinstance(a, types.CodeAction) for a in actions)
            assert actions[0].title == "Refactor with reasoning model…"
            assert {a.kind for a in actions} == {types.CodeActionKind.RefactorRewrite}
            titles = [a.title for a in actions]
            assert "Refactor: Extract function" in titles and "Refactor: Add type hints" in titles
            for action in actions:
                assert action.command is not None
                assert action.command.command == "gatewayLs.refactor"
                (argument,) = action.command.arguments or []
                assert argument["uri"] == uri and argument["range"] == range_json(AREA_BODY)
            assert actions[0].command.arguments[0]["instruction"] == ""
            assert all(a.command.arguments[0]["instruction"] for a in actions[1:])

            cursor = types.Position(line=8, character=4)
            assert not await ask(types.Range(start=cursor, end=cursor))
            assert endpoint.requests == []  # listing actions asks no model


async def test_refactor_applies_minimal_edits_reindented_into_the_method(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=ANSWER)) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            result = await refactor(client, uri)

            assert result["applied"] is True and result["endpoint"] == "reasoner"
            (edit,) = applied
            assert edit.label is not None and "reasoner" in edit.label
            assert_refactored(edit, uri, CIRCLE, REFACTORED)

            prompt = chat_prompt(endpoint)
            assert INSTRUCTION in prompt
            assert "squared = self.r * self.r" in prompt  # the selection
            assert "def area(self):" in prompt and "class Circle" in prompt  # around it
            assert "import math" in prompt  # the top of the file

            kinds = [type(value) for value in refactor_progress(client)]
            assert kinds[0] is types.WorkDoneProgressBegin
            assert types.WorkDoneProgressReport in kinds
            assert kinds[-1] is types.WorkDoneProgressEnd
            assert not messages_of(client, types.MessageType.Error)

            decision = (await status(client))["decisions"][-1]
            assert decision["kind"] == "refactor" and decision["endpoint"] == "reasoner"


async def test_refactor_through_an_anthropic_endpoint_keeps_the_key_secret(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    key = "sk-ant-test-" + "4f1d9c2b7e"
    with FakeLLMServer(Behaviour(text=ANSWER), api_key=key) as endpoint:
        async with lsp_session(
            tmp_path,
            config_text=anthropic_config("claude", endpoint),
            env={ANTHROPIC_KEY_ENV: key},
            extra_args=("--log-level", "debug"),
        ) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            result = await refactor(client, uri)

            assert result["applied"] is True
            (edit,) = applied
            assert edit.label is not None and "claude" in edit.label
            assert_refactored(edit, uri, CIRCLE, REFACTORED)
            request = endpoint.requests[-1]
            assert request.path == "/v1/messages"
            assert request.headers["x-api-key"] == key
            assert INSTRUCTION in chat_prompt(endpoint)

            endpoint.behaviour = Behaviour(fault="status:401")  # a failure gets logged too
            failed = await refactor(client, uri)
            assert failed["applied"] is False
            assert await eventually(lambda: bool(messages_of(client, types.MessageType.Error)))
            editor_log = "\n".join(m.message for m in client.log_messages)
    log = capfd.readouterr().err + editor_log  # the editor's log while it is connected
    assert "claude" in log  # the server did log, and about this endpoint
    assert key not in log


@pytest.mark.parametrize("how", ["cancelRequest", "progressCancel"])
async def test_cancel_mid_stream_applies_nothing_and_stops_the_model(
    tmp_path: Path, how: str
) -> None:
    long_answer = "```python\n" + "value = 1\n" * 400 + "```\n"
    behaviour = Behaviour(text=long_answer, chunk_delay_s=0.02)
    with FakeLLMServer(behaviour) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            pending = client.protocol.send_request(
                types.WORKSPACE_EXECUTE_COMMAND, refactor_params(uri), msg_id="refactor-1"
            )
            assert await endpoint.wait_for_async(lambda s: s.open_streams >= 1)
            assert await eventually(lambda: _reported(client))

            if how == "cancelRequest":
                client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="refactor-1"))
            else:
                (token,) = [t for t in client.progress_reports if "refactor" in str(t)]
                client.protocol.notify(
                    types.WINDOW_WORK_DONE_PROGRESS_CANCEL,
                    types.WorkDoneProgressCancelParams(token=token),
                )

            with pytest.raises(JsonRpcException) as raised:
                await asyncio.wait_for(asyncio.wrap_future(pending), 10)
            assert raised.value.code == REQUEST_CANCELLED
            assert await endpoint.wait_for_async(lambda s: s.disconnects >= 1)
            assert endpoint.completed_streams == 0
            # The answer to the request may overtake the end of the progress.
            assert await eventually(
                lambda: isinstance(refactor_progress(client)[-1], types.WorkDoneProgressEnd)
            )
            assert (await status(client))["endpoints"][0]["name"] == "reasoner"
            assert applied == []


def _reported(client: LanguageClient) -> bool:
    return any(
        isinstance(value, types.WorkDoneProgressReport)
        for token, values in client.progress_reports.items()
        if "refactor" in str(token)
        for value in values
    )


@pytest.mark.parametrize(
    ("behaviour", "why"),
    [
        (Behaviour(text="I am sorry, but I cannot refactor that code."), "contains no code"),
        (Behaviour(text="```python\ndef broken(:\n    pass\n```\n"), "not valid Python"),
        (Behaviour(fault="status:500"), "HTTP 500"),
    ],
    ids=["prose", "invalid-python", "http-500"],
)
async def test_a_bad_answer_is_reported_and_nothing_applied(
    tmp_path: Path, behaviour: Behaviour, why: str
) -> None:
    with FakeLLMServer(behaviour) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            result = await refactor(client, uri)

            assert result["applied"] is False
            assert await eventually(lambda: bool(messages_of(client, types.MessageType.Error)))
            (message,) = messages_of(client, types.MessageType.Error)
            assert "reasoner" in message and why in message
            assert applied == []
            assert isinstance(refactor_progress(client)[-1], types.WorkDoneProgressEnd)


async def test_an_unchanged_answer_is_said_so(tmp_path: Path) -> None:
    unchanged = "```python\nsquared = self.r * self.r\nreturn math.pi * squared\n```\n"
    with FakeLLMServer(Behaviour(text=unchanged)) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            result = await refactor(client, uri)

            assert result["applied"] is False and result["error"] == "no change"
            assert await eventually(lambda: bool(messages_of(client, types.MessageType.Info)))
            (message,) = messages_of(client, types.MessageType.Info)
            assert "reasoner" in message and "unchanged" in message
            assert applied == []


async def test_falls_back_to_the_next_refactor_endpoint(tmp_path: Path) -> None:
    with (
        FakeLLMServer(Behaviour(fault="status:500"), name="broken") as broken,
        FakeLLMServer(Behaviour(text=ANSWER), name="backup") as backup,
    ):
        config = refactor_config(("first", broken), ("second", backup))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            result = await refactor(client, uri)

            assert result["applied"] is True and result["endpoint"] == "second"
            assert len(broken.requests) == 1 and len(backup.requests) == 1
            (edit,) = applied
            assert edit.label is not None and "second" in edit.label
            assert "first" not in edit.label
            assert_refactored(edit, uri, CIRCLE, REFACTORED)
            decision = (await status(client))["decisions"][-1]
            assert decision["endpoint"] == "second" and decision["reason"] == "fallback"
            assert "first" in (decision["detail"] or "")


async def test_a_selection_inside_a_line_after_astral_characters(tmp_path: Path) -> None:
    line = 'label = "🐍 " + name.upper()  # keep\n'  # the snake is two UTF-16 code units
    text = "name = 'py'\n" + line
    start = len(line[: line.index("name.upper()")].encode("utf-16-le")) // 2
    selection = types.Range(
        start=types.Position(line=1, character=start),
        end=types.Position(line=1, character=start + len("name.upper()")),
    )
    with FakeLLMServer(Behaviour(text="```python\nname.title()\n```")) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "label.py").as_uri()
            open_document(client, uri, text)

            result = await refactor(client, uri, selection=selection, instruction="Title case.")

            assert result["applied"] is True
            (edit,) = applied
            expected = text.replace("name.upper()", "name.title()")
            assert apply_workspace_edit(text, edit.edit, uri) == expected
            assert "⟦selection⟧name.upper()⟦/selection⟧" in chat_prompt(endpoint)


def _in_secrets(tmp_path: Path) -> tuple[str, str]:
    return (tmp_path / "secrets" / "circle.py").as_uri(), CIRCLE


def _dotenv(tmp_path: Path) -> tuple[str, str]:
    return (tmp_path / "app" / ".env.production").as_uri(), CIRCLE


def _planted_key(tmp_path: Path) -> tuple[str, str]:
    text = CIRCLE.replace("import math\n", f'import math\n\nAWS_KEY = "{PLANTED_AWS_KEY}"\n')
    return (tmp_path / "circle.py").as_uri(), text


@pytest.mark.parametrize("document", [_in_secrets, _dotenv, _planted_key])
async def test_a_sensitive_document_never_reaches_the_remote(
    tmp_path: Path, document: Callable[[Path], tuple[str, str]]
) -> None:
    with FakeLLMServer(Behaviour(text=ANSWER)) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri, text = document(tmp_path)
            open_document(client, uri, text)
            lines = text.splitlines(keepends=True)
            body = lines.index("    def area(self):\n") + 1
            selection = types.Range(
                start=types.Position(line=body, character=0),
                end=types.Position(line=body + 2, character=0),
            )

            result = await refactor(client, uri, selection=selection)

            assert result["applied"] is False
            assert await eventually(lambda: bool(messages_of(client, types.MessageType.Error)))
            (message,) = messages_of(client, types.MessageType.Error)
            assert "must stay on this machine" in message
            assert "local model is disabled" in message
            assert applied == []
            assert endpoint.requests == [] and endpoint.bytes_received == 0


async def test_a_document_changed_during_the_refactor_is_left_alone(tmp_path: Path) -> None:
    behaviour = Behaviour(text=ANSWER, chunk_delay_s=0.03)
    with FakeLLMServer(behaviour) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            running = asyncio.ensure_future(refactor(client, uri))
            assert await endpoint.wait_for_async(lambda s: s.open_streams >= 1)
            insert_text(
                client, uri, version=2, line=12, character=0, text="        # typed meanwhile\n"
            )

            result = await running

            assert result == {"applied": False, "error": "document changed"}
            assert endpoint.completed_streams == 1  # the model did answer, in full
            assert applied == []
            assert await eventually(lambda: bool(messages_of(client, types.MessageType.Warning)))
            (warning,) = messages_of(client, types.MessageType.Warning)
            assert "changed" in warning and "nothing was applied" in warning


@pytest.mark.model
async def test_a_sensitive_document_is_refactored_by_the_local_model(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    """The small model may answer well, badly or slowly (the deadline keeps this test short);
    whichever it does, the person hears of it, and the remote hears nothing."""
    with FakeLLMServer(Behaviour(text=ANSWER)) as endpoint:
        config = (
            "[routing]\nrefactor_deadline_ms = 20000\n"
            f'[local]\nmodel_path = "{bundled_model_path.as_posix()}"\nn_ctx = 1024\n'
            + endpoint_toml("reasoner", endpoint.base_url, fim=False, roles=REFACTOR_ROLE)
        )
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "secrets" / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)

            result = await asyncio.wait_for(
                client.workspace_execute_command_async(refactor_params(uri)), 120
            )
            assert isinstance(result, dict), result

            if result["applied"]:
                (edit,) = applied
                assert edit.label is not None and "local" in edit.label
            else:
                assert applied == []
                assert await eventually(lambda: bool(client.messages))
                assert "local" in client.messages[-1].message
            assert endpoint.requests == []


async def test_shutdown_during_a_refactor_is_clean(tmp_path: Path) -> None:
    behaviour = Behaviour(text=ANSWER, chunk_delay_s=0.5)
    with FakeLLMServer(behaviour) as endpoint:
        config = refactor_config(("reasoner", endpoint))
        async with lsp_session(tmp_path, config_text=config) as client:
            applied = record_applied_edits(client)
            uri = (tmp_path / "circle.py").as_uri()
            open_document(client, uri, CIRCLE)
            pending = client.protocol.send_request(
                types.WORKSPACE_EXECUTE_COMMAND, refactor_params(uri), msg_id="refactor-1"
            )
            assert await endpoint.wait_for_async(lambda s: s.open_streams >= 1)
        # Leaving the session sent shutdown and exit; the shutdown was answered.
        with pytest.raises(JsonRpcException):
            await asyncio.wait_for(asyncio.wrap_future(pending), 10)
        assert await endpoint.wait_for_async(lambda s: s.disconnects >= 1)
        assert applied == []

"""End to end: the real server over stdio, driven as VS Code would, against loopback endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.config_text import LOCAL_OFF
from tests.support.lsp_session import (
    endpoint_toml,
    eventually,
    inline_completion,
    insert_text,
    lsp_session,
    open_document,
    server_status,
    vscode_capabilities,
)

GENEROUS = "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n"


def config_for(
    *servers: tuple[str, FakeLLMServer], fim: bool = True, routing: str = GENEROUS
) -> str:
    endpoints = "".join(endpoint_toml(name, s.base_url, fim=fim) for name, s in servers)
    return routing + LOCAL_OFF + endpoints


def completion_bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.json for r in server.requests if r.path.endswith("/completions") and r.json]


async def test_inline_completion_from_a_fim_endpoint(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="return a + b\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "add.py").as_uri()
            text = "def add(a, b):\n    \n\nprint(add(1, 2))\n"
            open_document(client, uri, text)
            result = await inline_completion(client, uri, 1, 4)
            assert result is not None and result.items
            assert result.items[0].insert_text == "return a + b"
            body = completion_bodies(endpoint)[-1]
            assert body["prompt"] == "def add(a, b):\n    "
            assert body["suffix"].startswith("\n\nprint(add(1, 2))")
            assert body["stream"] is True


async def test_chat_endpoint_gets_a_fill_in_the_middle_instruction(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="```python\nreturn a * b\n```")) as endpoint:
        config = config_for(("chatty", endpoint), fim=False)
        async with lsp_session(tmp_path, config_text=config) as client:
            uri = (tmp_path / "mul.py").as_uri()
            open_document(client, uri, "def mul(a, b):\n    \n")
            result = await inline_completion(client, uri, 1, 4)
            assert result is not None and result.items
            assert result.items[0].insert_text == "return a * b"
            paths = [r.path for r in endpoint.requests]
            assert "/v1/chat/completions" in paths


async def test_completion_item_carries_the_same_suggestion(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="urn a + b\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "add.py").as_uri()
            open_document(client, uri, "def add(a, b):\n    ret\n")
            result = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=types.Position(line=1, character=7),
                )
            )
            assert isinstance(result, types.CompletionList)
            item = result.items[0]
            assert isinstance(item.text_edit, types.TextEdit)
            assert item.text_edit.new_text == "return a + b"
            assert item.text_edit.range.start == types.Position(line=1, character=4)


async def test_utf16_positions_with_non_ascii_before_the_cursor(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text=" + 1\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "u.py").as_uri()
            line = 'x = "héllo 🐍 wörld"'  # the snake is two UTF-16 code units
            open_document(client, uri, line + "  # tail\n")
            character = len(line.encode("utf-16-le")) // 2
            await inline_completion(client, uri, 0, character)
            body = completion_bodies(endpoint)[-1]
            assert body["prompt"] == line
            assert body["suffix"].startswith("  # tail")


async def test_incremental_changes_are_applied_before_the_next_request(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="pass\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "inc.py").as_uri()
            open_document(client, uri, "def f():\n    \n")
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(
                                start=types.Position(line=0, character=4),
                                end=types.Position(line=0, character=5),
                            ),
                            text="g_ünïcode",
                        )
                    ],
                )
            )
            await inline_completion(client, uri, 1, 4)
            assert completion_bodies(endpoint)[-1]["prompt"] == "def g_ünïcode():\n    "


async def test_typing_into_a_suggestion_is_served_from_the_cache(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="return a + b\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "c.py").as_uri()
            open_document(client, uri, "def add(a, b):\n    \n")
            await inline_completion(client, uri, 1, 4)
            sent = len(completion_bodies(endpoint))
            insert_text(client, uri, version=2, line=1, character=4, text="ret")
            result = await inline_completion(client, uri, 1, 7)
            assert result is not None and result.items[0].insert_text == "urn a + b"
            assert len(completion_bodies(endpoint)) == sent
            status = await server_status(client)
            last = status["decisions"][-1]  # what the editor shows now, for its status bar
            assert (last["endpoint"], last["reason"], last["uri"]) == ("fast", "cache", uri)


async def test_cancel_request_stops_the_backend_call(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="never", fault="hang_before_headers")) as endpoint:
        config = config_for(
            ("hung", endpoint),
            routing="[routing]\ninline_deadline_ms = 20000\nhedge_after_ms = 10000\n",
        )
        async with lsp_session(tmp_path, config_text=config) as client:
            uri = (tmp_path / "h.py").as_uri()
            open_document(client, uri, "x = \n")
            pending = client.protocol.send_request(
                types.TEXT_DOCUMENT_INLINE_COMPLETION,
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=types.Position(line=0, character=4),
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Automatic
                    ),
                ),
                msg_id="cancel-me",
            )
            assert await eventually(lambda: len(endpoint.requests) > 0)
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
            with pytest.raises(JsonRpcException):
                await asyncio.wait_for(asyncio.wrap_future(pending), 10)
            assert await eventually(lambda: endpoint.disconnects >= 1)


async def test_newer_request_supersedes_the_one_in_flight(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="1\n", latency_s=30)) as endpoint:
        config = config_for(
            ("slow", endpoint),
            routing="[routing]\ninline_deadline_ms = 3000\nhedge_after_ms = 2000\n",
        )
        async with lsp_session(tmp_path, config_text=config) as client:
            uri = (tmp_path / "s.py").as_uri()
            open_document(client, uri, "x = \n")
            first = asyncio.ensure_future(inline_completion(client, uri, 0, 4))
            assert await eventually(lambda: len(endpoint.requests) >= 1)
            second = asyncio.ensure_future(inline_completion(client, uri, 0, 4))
            with pytest.raises(JsonRpcException):
                await asyncio.wait_for(first, 10)
            result = await asyncio.wait_for(second, 10)
            assert result is not None and not result.items  # the deadline passed: nothing late


async def test_completion_and_inline_completion_do_not_supersede_each_other(
    tmp_path: Path,
) -> None:
    """Neovim with both on sends both for one keystroke: each gets its answer."""
    with FakeLLMServer(Behaviour(text=" + b\n", latency_s=0.5)) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("slow", endpoint))) as client:
            uri = (tmp_path / "both.py").as_uri()
            open_document(client, uri, "def add(a, b):\n    return a\n")
            completion = asyncio.ensure_future(
                client.text_document_completion_async(
                    types.CompletionParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        position=types.Position(line=1, character=12),
                    )
                )
            )
            assert await eventually(lambda: len(endpoint.requests) >= 1)
            inline = await asyncio.wait_for(inline_completion(client, uri, 1, 12), 10)
            listed = await asyncio.wait_for(completion, 10)
            assert inline is not None and inline.items[0].insert_text == " + b"
            assert isinstance(listed, types.CompletionList)
            edit = listed.items[0].text_edit
            assert edit is not None and edit.new_text == "a + b"


async def multi_line_item(
    tmp_path: Path, capabilities: types.ClientCapabilities | None = None
) -> types.CompletionItem:
    """The completion item for a two-line suggestion with snippet characters in it."""
    with FakeLLMServer(Behaviour(text="x = {'$a': 1}\n    return x\n")) as endpoint:
        config = config_for(("fast", endpoint))
        async with lsp_session(tmp_path, config_text=config, capabilities=capabilities) as client:
            uri = (tmp_path / "m.py").as_uri()
            open_document(client, uri, "def f():\n    \n")
            result = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=types.Position(line=1, character=4),
                )
            )
    assert isinstance(result, types.CompletionList) and result.items
    return result.items[0]


async def test_a_multi_line_completion_item_is_a_snippet_that_inserts_the_text_as_is(
    tmp_path: Path,
) -> None:
    item = await multi_line_item(tmp_path)
    assert item.kind == types.CompletionItemKind.Text
    assert item.insert_text_format == types.InsertTextFormat.Snippet
    assert isinstance(item.text_edit, types.TextEdit)
    # Later lines relative to the line's indentation, which the client adds back.
    assert item.insert_text_mode == types.InsertTextMode.AdjustIndentation
    assert item.text_edit.new_text == "x = {'\\$a': 1\\}\nreturn x"


async def test_a_client_without_snippets_gets_the_multi_line_item_as_plain_text(
    tmp_path: Path,
) -> None:
    """eglot without yasnippet declares no snippet support and inserts the edit's text as it is,
    escapes included, without adding indentation back."""
    capabilities = vscode_capabilities()
    text_document = capabilities.text_document
    assert text_document is not None and text_document.completion is not None
    item_capabilities = text_document.completion.completion_item
    assert item_capabilities is not None
    item_capabilities.snippet_support = False
    item = await multi_line_item(tmp_path, capabilities)
    assert item.insert_text_format == types.InsertTextFormat.PlainText
    assert item.insert_text_mode == types.InsertTextMode.AsIs
    assert isinstance(item.text_edit, types.TextEdit)
    assert item.text_edit.new_text == "x = {'$a': 1}\n    return x"


async def test_bad_positions_and_documents_never_crash_the_server(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="ok\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            unknown = (tmp_path / "nobody-opened-this.py").as_uri()
            result = await inline_completion(client, unknown, 0, 0)
            assert result is not None and not result.items

            uri = (tmp_path / "p.py").as_uri()
            open_document(client, uri, "ab\ncd\n")
            for line, character in [(0, 99), (50, 0), (50, 50)]:
                result = await inline_completion(client, uri, line, character)
                assert result is not None

            empty = (tmp_path / "empty.py").as_uri()
            open_document(client, empty, "")
            assert await inline_completion(client, empty, 0, 0) is not None

            big = (tmp_path / "big.py").as_uri()
            open_document(client, big, "x = 1\n" * 900_000)  # about 5 MB
            result = await inline_completion(client, big, 450_000, 5)
            assert result is not None
            body = completion_bodies(endpoint)[-1]
            assert len(body["prompt"]) < 20_000  # a window, not the whole file

            status = await server_status(client)
            assert status["endpoints"][0]["name"] == "fast"


async def test_status_reports_endpoints_and_decisions(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="pass\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "s.py").as_uri()
            open_document(client, uri, "def f():\n    \n")
            await inline_completion(client, uri, 1, 4)
            status = await server_status(client)
            json.dumps(status)  # plain JSON
            (fast,) = status["endpoints"]
            assert fast["requests"] == 1 and fast["wins"] == 1 and fast["errors"] == 0
            assert fast["health"] == "healthy" and fast["p50_ms"] is not None
            decision = status["decisions"][-1]
            assert (
                decision["endpoint"] == "fast" and decision["reason"] == "config-order"
            )  # unmeasured
            assert decision["kind"] == "inline" and decision["uri"] == uri


async def test_set_offline_always_keeps_everything_home(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="leak\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("remote", endpoint))) as client:
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="gatewayLs.setOffline", arguments=["always"])
            )
            uri = (tmp_path / "o.py").as_uri()
            open_document(client, uri, "x = \n")
            result = await inline_completion(client, uri, 0, 4)
            assert result is not None and not result.items  # local model disabled here
            assert endpoint.requests == []
            with pytest.raises(JsonRpcException):
                await client.workspace_execute_command_async(
                    types.ExecuteCommandParams(command="gatewayLs.setOffline", arguments=["sky"])
                )


async def test_a_missing_api_key_variable_is_reported_once_by_name(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(text="x\n")) as endpoint:
        config = config_for(("fast", endpoint)) + 'api_key_env = "GATEWAY_LS_NEVER_SET"\n'
        async with lsp_session(tmp_path, config_text=config) as client:
            assert await eventually(lambda: bool(client.messages))
            (message,) = client.messages
            assert message.type == types.MessageType.Warning
            assert "fast" in message.message and "GATEWAY_LS_NEVER_SET" in message.message


async def test_a_broken_local_model_file_is_reported_by_name(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model at all")
    config = f'[routing]\noffline = "always"\n\n[local]\nmodel_path = "{broken}"\n'
    async with lsp_session(tmp_path, config_text=config) as client:
        assert await eventually(lambda: bool(client.messages))
        error = client.messages[-1]
        assert error.type == types.MessageType.Error
        assert "broken.gguf" in error.message
        status = await server_status(client)
        assert status["local"]["state"] == "failed"
        uri = (tmp_path / "a.py").as_uri()
        open_document(client, uri, "x = \n")
        result = await inline_completion(client, uri, 0, 4)
        assert result is not None and not result.items  # nothing to serve it, and no crash


async def test_an_inline_item_reports_its_acceptance_by_an_id_the_server_gave(
    tmp_path: Path,
) -> None:
    """The item carries `gatewayLs.inlineAccepted` with an id; run after the insertion, as an
    LSP 3.18 client does, it counts for the endpoint that answered. An id counts once, and an
    id the server never gave counts nothing."""
    with FakeLLMServer(Behaviour(text="return a + b\n")) as endpoint:
        async with lsp_session(tmp_path, config_text=config_for(("fast", endpoint))) as client:
            uri = (tmp_path / "add.py").as_uri()
            open_document(client, uri, "def add(a, b):\n    \n\nprint(add(1, 2))\n")
            result = await inline_completion(client, uri, 1, 4)
            assert result is not None and result.items
            item = result.items[0]
            assert item.command is not None
            assert item.command.command == "gatewayLs.inlineAccepted"
            assert isinstance(item.insert_text, str)
            insert_text(client, uri, version=2, line=1, character=4, text=item.insert_text)

            async def run(arguments: Sequence[Any] | None) -> Any:
                return await client.workspace_execute_command_async(
                    types.ExecuteCommandParams(
                        command="gatewayLs.inlineAccepted", arguments=arguments
                    )
                )

            assert await run(item.command.arguments) == {"accepted": True}
            assert await run(item.command.arguments) == {"accepted": False}
            assert await run(["made-up"]) == {"accepted": False}
            assert await run([{"text": "forged", "endpoint": "fast"}]) == {"accepted": False}
            assert await run(None) == {"accepted": False}
            status = await server_status(client)
            fast = next(e for e in status["endpoints"] if e["name"] == "fast")
            # Measured once the kept rate's window (30 s) is over; not yet.
            assert fast["inline"] == {
                "offered": 1,
                "accepted": 1,
                "acceptance_rate": 1.0,
                "kept_rate": None,
            }

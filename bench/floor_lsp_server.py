"""The least a Python language server does for an inline suggestion or a next edit: the floor
that `bench_lsp_overhead` and `bench_next_edit_path` measure gateway-ls against.

A plain pygls server on gateway-ls's own stdio transport and event loop, with the converter
gateway-ls uses (the params of a method lsprotocol does not type stay JSON, which any pygls
server can choose). From the document pygls keeps for it, its inline handler makes the same
completion request (the text before the cursor) through the same HTTP backend and answers
with its text; its next-edit handler (`textDocument/copilotInlineEdit`) builds the same edit
prompt, makes the same edit request, and answers with the model's text as one edit at the
cursor. No privacy, routing, history,
context, cache or minimal edits. What it adds over the direct request is what the client,
pygls and the two pipe hops cost; what gateway-ls adds over it is its own.

Run as `python -m bench.floor_lsp_server BASE_URL [KIND]`: the endpoint's base URL, and its
kind (`openai`, the default, or `inception`, whose key comes from `BENCH_KEY`).
"""

from __future__ import annotations

import sys
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from bench.harness.permits import permit_for
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.config.model import EndpointConfig
from lsp_server.lsp.protocol import json_params_converter
from lsp_server.lsp.stdio_transport import serve_stdio
from lsp_server.nextedit.prompts import edit_call
from lsp_server.nextedit.region import editable_region
from lsp_server.nextedit.request import EditRequest

NEXT_EDIT_METHOD = "textDocument/copilotInlineEdit"


def endpoint(base_url: str, kind: str) -> EndpointConfig:
    if kind == "inception":
        return EndpointConfig(
            name="floor",
            kind="inception",
            base_url=base_url,
            model="mercury-edit-2",
            api_key_env="BENCH_KEY",
        )
    return EndpointConfig(name="floor", kind="openai", base_url=base_url, model="fake-model")


def floor_server(base_url: str, kind: str = "openai") -> LanguageServer:
    server = LanguageServer("floor", "1", converter_factory=json_params_converter)
    backend = OpenAICompatibleBackend(endpoint(base_url, kind))
    permit = permit_for(backend)  # asked once: a floor server has no gate to pass

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION)
    async def inline_completion(
        ls: LanguageServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        document = ls.workspace.get_text_document(params.text_document.uri)
        prefix = document.source[: document.offset_at_position(params.position)]
        answer = backend.complete(CompletionRequest(prefix, "\n"), permit=permit)
        text = "".join([part async for part in answer])
        return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=text)])

    @server.feature(NEXT_EDIT_METHOD)
    async def next_edit(ls: LanguageServer, params: Any) -> dict[str, Any]:
        identifier, position = params["textDocument"], params["position"]
        document = ls.workspace.get_text_document(identifier["uri"])
        source = document.source
        cursor = document.offset_at_position(
            types.Position(line=position["line"], character=position["character"])
        )
        request = EditRequest(
            uri=document.uri,
            path=document.filename or "",
            text=source,
            cursor=cursor,
            region=editable_region(source, cursor),
        )
        answer = backend.edit(edit_call(request, backend.config), permit=permit)
        text = "".join([part async for part in answer])
        return {
            "edits": [
                {
                    "text": text,
                    "range": {"start": position, "end": position},
                    "textDocument": identifier,
                    "command": {"title": "Accept", "command": "floor.accept", "arguments": ["1"]},
                }
            ]
        }

    return server


def main() -> int:
    kind = sys.argv[2] if len(sys.argv) > 2 else "openai"
    return serve_stdio(floor_server(sys.argv[1], kind), sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())

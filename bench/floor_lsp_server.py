"""The least a Python language server does for an inline suggestion: the floor that
`bench_lsp_overhead` measures gateway-ls against.

A plain pygls server on gateway-ls's own stdio transport and event loop, whose only handler
makes the same completion request through the same HTTP backend and answers with its text:
no documents, privacy, routing, context or cache. What it adds over the direct request is what
the client, pygls and the two pipe hops cost; what gateway-ls adds over it is its own.

Run as `python -m bench.floor_lsp_server BASE_URL` (the endpoint's OpenAI base URL).
"""

from __future__ import annotations

import sys

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.openai_compat import OpenAICompatibleBackend
from lsp_server.config.model import EndpointConfig
from lsp_server.lsp.stdio_transport import serve_stdio


def floor_server(base_url: str) -> LanguageServer:
    server = LanguageServer("floor", "1")
    backend = OpenAICompatibleBackend(
        EndpointConfig(name="floor", kind="openai", base_url=base_url, model="fake-model")
    )

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION)
    async def inline_completion(
        ls: LanguageServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        prefix = f"value_{params.position.line} = "
        text = "".join([part async for part in backend.complete(CompletionRequest(prefix, "\n"))])
        return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=text)])

    return server


def main() -> int:
    return serve_stdio(floor_server(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())

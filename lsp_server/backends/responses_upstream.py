"""An upstream that speaks the Responses API itself (an endpoint with `responses_path`).

The gateway passes a Responses request to it as the client sent it, with the endpoint's own
`model`, and passes its events back one by one: nothing is lost to a translation. Bodies are
bounded as every upstream's are (`http_body`, `sse_stream`); failures are `BackendError`s like any
backend's, so the caller words them as it words a chat's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from lsp_server.backends.base import BackendError, Usage
from lsp_server.backends.http_body import raise_for_status, read_json
from lsp_server.backends.http_client import (
    bearer_headers,
    endpoint_timeout_s,
    json_content,
    make_client,
    setup_timing,
)
from lsp_server.backends.http_failures import transport_error
from lsp_server.backends.sse_stream import is_event_stream, sse_events
from lsp_server.config.model import EndpointConfig
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit

# The events after which a Responses stream has said all it will.
FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


class ResponsesUpstream:
    """One endpoint's Responses API, over a keep-alive client of its own."""

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.name = config.name
        self._client = make_client(config.base_url, endpoint_timeout_s(config))

    async def events(
        self, payload: dict[str, Any], *, permit: Permit, usage: Usage | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The upstream's answer to `payload` as Responses events; a whole (not streamed)
        answer comes as one event, `{"type": "response", "response": ...}`. The time spent
        opening a connection is added to `usage.setup_ms`."""
        permit.check_remote(self.name)
        body = {**payload, "model": self.config.model}
        path = self.config.responses_path.lstrip("/")
        try:
            async with self._client.stream(
                "POST", path, **json_content(body, self._headers()), extensions=setup_timing(usage)
            ) as response:
                await raise_for_status(self.name, response)
                if not is_event_stream(response):
                    yield {"type": "response", "response": await read_json(self.name, response)}
                    return
                async for event in sse_events(self.name, response):
                    if not event.data.strip() or event.data.strip() == "[DONE]":
                        continue
                    parsed = self._parse(event.data)
                    yield parsed
                    if parsed.get("type") in FINAL_EVENTS:
                        return
                raise BackendError(
                    self.name, FailureKind.PROTOCOL, "stream ended before the response did"
                )
        except httpx.HTTPError as exc:
            raise transport_error(self.name, exc) from None

    def _parse(self, data: str) -> dict[str, Any]:
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            raise BackendError(self.name, FailureKind.PROTOCOL, "malformed SSE data") from None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("type"), str):
            raise BackendError(self.name, FailureKind.PROTOCOL, "an event without a type")
        return parsed

    def _headers(self) -> dict[str, str]:
        return bearer_headers(self.name, self.config)

    async def aclose(self) -> None:
        await self._client.aclose()

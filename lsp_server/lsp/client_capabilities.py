"""What the client said it supports, read defensively: a capability left out means no."""

from __future__ import annotations

from typing import Protocol

from lsprotocol import types


class KnowsTheClient(Protocol):
    """A language server, as far as what the client said at `initialize` goes."""

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...


def client_supports_progress(server: KnowsTheClient) -> bool:
    try:
        window = server.client_capabilities.window
    except AttributeError:
        return False
    return bool(window and window.work_done_progress)


def client_expands_snippets(server: KnowsTheClient) -> bool:
    try:
        item = server.client_capabilities.text_document.completion.completion_item  # type: ignore[union-attr]
    except AttributeError:  # a capability left out
        return False
    return bool(item and item.snippet_support)

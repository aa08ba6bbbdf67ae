"""Which class serves which `kind` of endpoint: adding a provider is configuration, not code.

The backend modules are imported on first use: the HTTP stack and llama.cpp are not needed to
answer `initialize`, and an editor waits for that answer before it shows anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import cache

from lsp_server.backends.base import Backend
from lsp_server.backends.local_model import LocalModel
from lsp_server.config.model import EndpointConfig, LocalConfig

ProgressCallback = Callable[[str, float | None], None]


def remote_backend(config: EndpointConfig) -> Backend:
    if config.kind == "anthropic":
        from lsp_server.backends.anthropic import AnthropicBackend

        return AnthropicBackend(config)
    if config.kind == "llamacpp":
        from lsp_server.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(config)
    from lsp_server.backends.openai_compat import OpenAICompatibleBackend

    # "openai", "ollama" (its /v1 API), "inception", "mistral", "deepseek": paths differ only.
    return OpenAICompatibleBackend(config)


@cache
def preparing_remote_backends() -> Future[None]:
    """Start importing the HTTP backends and setting up what their clients share, once, on a
    thread of its own. Done by the first client on the event loop, this costs the first
    keystroke more than its deadline; the language server starts it once its `initialize`
    answer is out, and a keystroke that comes sooner waits for it within its deadline."""
    prepared: Future[None] = Future()

    def prepare() -> None:
        try:
            from lsp_server.backends import anthropic, http_client, openai_compat  # noqa: F401

            http_client.prepare()
        except BaseException as error:  # the first client on the loop will meet it again
            prepared.set_exception(error)
        else:
            prepared.set_result(None)

    # Not a daemon: one still importing when the interpreter shuts down (an `exit` right after
    # `initialize`) can crash it, where this way the exit waits for the import to end.
    threading.Thread(target=prepare, name="prepare-http", daemon=False).start()
    return prepared


def local_backend_factory(
    on_progress: ProgressCallback | None,
) -> Callable[[LocalConfig], LocalModel]:
    def make(config: LocalConfig) -> LocalModel:
        from lsp_server.backends.local.backend import LocalBackend

        return LocalBackend(config, on_progress=on_progress)

    return make

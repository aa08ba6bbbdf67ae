"""Which class serves which `kind` of endpoint: adding a provider is configuration, not code.

The backend modules are imported on first use: the HTTP stack and llama.cpp are not needed to
answer `initialize`, and an editor waits for that answer before it shows anything.
"""

from __future__ import annotations

from collections.abc import Callable

from lsp_server.backends.base import Backend
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


def local_backend_factory(on_progress: ProgressCallback | None) -> Callable[[LocalConfig], Backend]:
    def make(config: LocalConfig) -> Backend:
        from lsp_server.backends.local import LocalBackend

        return LocalBackend(config, on_progress=on_progress)

    return make

"""Provider kinds: the defaults that make a provider a few lines of configuration.

Each kind names where its API lives and which paths serve fill-in-the-middle and chat, as each
provider documents them. A field the user writes in the file wins over the kind's default.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.config.model import EditFormat, EndpointConfig, EndpointKind

# Context beyond the file in an endpoint's inline prompts, in tokens, where it sets none.
REMOTE_CONTEXT_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class ProviderPreset:
    base_url: str | None  # None: the file must give one
    fim_path: str | None  # None: the provider has no fill-in-the-middle API
    chat_path: str
    api_key_env: str = ""
    fim: bool = True
    context_tokens: int = REMOTE_CONTEXT_TOKENS


PRESETS: dict[EndpointKind, ProviderPreset] = {
    "openai": ProviderPreset(None, "/completions", "/chat/completions"),
    "ollama": ProviderPreset(
        "http://127.0.0.1:11434/v1", "/completions", "/chat/completions", fim=False
    ),
    "anthropic": ProviderPreset(None, None, "/v1/messages", fim=False),
    # Mercury: `mercury-edit-2` fills in the middle, `mercury-2` chats.
    "inception": ProviderPreset(
        "https://api.inceptionlabs.ai/v1",
        "/fim/completions",
        "/chat/completions",
        "INCEPTION_API_KEY",
    ),
    # Codestral's FIM answers in the chat-completion shape (`message` / `delta`).
    "mistral": ProviderPreset(
        "https://api.mistral.ai/v1", "/fim/completions", "/chat/completions", "MISTRAL_API_KEY"
    ),
    # FIM is a beta feature served under `/beta`; chat is at the root.
    "deepseek": ProviderPreset(
        "https://api.deepseek.com", "/beta/completions", "/chat/completions", "DEEPSEEK_API_KEY"
    ),
    # llama.cpp's own server: `/infill` formats the model's FIM tokens itself and reuses the
    # KV cache of the previous keystroke (`cache_prompt`); chat through its OpenAI API. No
    # context beyond the file unless the endpoint sets a budget: on `llama-server` with the
    # Qwen2.5-Coder 1.5B, `input_extra` did not help and made a document's first request cost
    # 1.5 to 1.8 times as much (`bench/bench_quality.py --llama-server`, bench/README.md).
    "llamacpp": ProviderPreset(
        "http://127.0.0.1:8080", "/infill", "/v1/chat/completions", context_tokens=0
    ),
}


def fim_path(endpoint: EndpointConfig) -> str:
    """The FIM call's path under `base_url`: the endpoint's own, else its kind's."""
    return endpoint.fim_path or PRESETS[endpoint.kind].fim_path or "/completions"


def chat_path(endpoint: EndpointConfig) -> str:
    return endpoint.chat_path or PRESETS[endpoint.kind].chat_path


# Mercury's next-edit API (Inception's documented path), and the OpenAI completions path a
# llama.cpp server answers raw prompts at (for the open Zeta, Zeta 2 and Sweep models).
MERCURY_EDIT_PATH = "/edit/completions"
RAW_COMPLETIONS_PATH = {"llamacpp": "/v1/completions"}


def edit_format(endpoint: EndpointConfig) -> EditFormat:
    """How next edits are asked of this endpoint: its own format, else Mercury's edit API for
    Inception, an instruction on the chat API for every other kind."""
    if endpoint.edit_format:
        return endpoint.edit_format
    return "mercury" if endpoint.kind == "inception" else "chat"


def edit_path(endpoint: EndpointConfig) -> str:
    """Where a next-edit request is sent under `base_url`: the endpoint's own path, else the
    format's (Mercury's edit API, the raw completions API, the chat API)."""
    if endpoint.edit_path:
        return endpoint.edit_path
    match edit_format(endpoint):
        case "mercury":
            return MERCURY_EDIT_PATH
        case "zeta" | "zeta2" | "sweep":
            return RAW_COMPLETIONS_PATH.get(endpoint.kind, "/completions")
        case _:
            return chat_path(endpoint)

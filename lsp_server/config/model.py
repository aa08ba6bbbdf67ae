"""The configuration model: what `config.toml` (and the editor's `gatewayLs` settings) describe.

The one declaration of every key: each field gives its type and default, and its `key(...)`
its meaning, its check and whether an editor may set it (`config/keys.py`). Loading,
validation and hot reload live in `config/loader.py`, `config/validation.py` and
`config/watcher.py`, which read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lsp_server.config.checks import (
    CONTEXT_TOKENS,
    ENV_VAR_NAME,
    ENV_VAR_NAMES,
    HTTP_URL,
    NON_EMPTY,
    NON_EMPTY_ITEMS,
    NOT_NEGATIVE,
    PORT,
    POSITIVE,
    RATIO,
    ROLES,
    STATE_URL,
    URL_PATH,
    describe,
)
from lsp_server.config.keys import Check, key

OfflineMode = Literal["auto", "always", "never"]
LocalToolCalls = Literal["auto", "chatml", "off"]
EndpointKind = Literal[
    "openai", "anthropic", "ollama", "inception", "mistral", "deepseek", "llamacpp"
]
# "inline": keystroke-level suggestions; "edit": next-edit predictions; "refactor": rewrites by
# a reasoning model; "agent": chat with tools from the gateway (coding agents).
Role = Literal["inline", "edit", "refactor", "agent"]
# How a next-edit prediction is asked: Mercury's edit API, the prompts of the open Zeta (its
# first form, or Zeta 2's) and Sweep models on a raw completions API, or an instruction on any
# chat API. Empty: the kind's.
EditFormat = Literal["", "mercury", "zeta", "zeta2", "sweep", "chat"]
# How readily a predicted next edit is shown (`nextedit/edit_filter.py`): "high" drops only
# whitespace-only edits and ones dismissed there a moment ago; "medium" also edits that undo
# the last edit, rewrite what is being typed or rewrite much of the region; "low" also edits
# far from the cursor or large.
EditEagerness = Literal["low", "medium", "high"]

# Answer sizes, in tokens, shared by every part that asks for or caps a chat answer.
CHAT_MAX_TOKENS = 4096  # a refactor or chat answer, unless an endpoint caps it lower
# The local model's chat: a small CPU model writing thousands of tokens outlasts any deadline.
LOCAL_CHAT_MAX_TOKENS = 1024

# The credential files people keep next to code. Matched without regard to case, after the path
# is canonicalised (see `privacy.policy`).
DEFAULT_SENSITIVE_GLOBS: tuple[str, ...] = (
    "**/.env",
    "**/.env.*",
    "**/.envrc",
    "**/*.pem",
    "**/*.key",
    "**/secrets/**",
    "**/id_@(rsa|dsa|ecdsa|ed25519)!(*.pub)",  # SSH private keys, not the public halves
    "**/*.ppk",
    "**/?(_|.)netrc",
    "**/.npmrc",
    "**/.pypirc",
    "**/@(.pgpass|pgpass.conf)",  # PostgreSQL
    "**/.git-credentials",
    "**/.aws/credentials",
    "**/.docker/config.json",
    "**/.kube/config",
    "**/*kubeconfig*",
    "**/*.@(p12|pfx|jks|keystore)",
    "**/*.tfvars",
    "**/*.tfvars.json",
    "**/*.tfstate",
    "**/*.tfstate.backup",
    "**/*service?account*.json",
    "**/client_secret*.json",
    "**/application_default_credentials.json",  # gcloud
    "**/gcloud/@(credentials|access_tokens).db",
    "**/gcloud/legacy_credentials/**",
    "**/.azure/**",  # Azure CLI token caches and service principals
    "**/@(gh|GitHub CLI)/hosts.yml",  # GitHub CLI
    "**/.dev.vars",  # Cloudflare Workers
    "**/.dev.vars.*",
    "**/.streamlit/secrets.toml",
    "**/config/secrets.yml",  # Rails
    # ASP.NET Core: per-environment settings hold production secrets; the Development file is
    # the template's, checked in to be shared (its passwords are still caught by content).
    "**/appsettings.!(Development).json",
    "**/usersecrets/*/secrets.json",  # dotnet user-secrets
)


@dataclass(frozen=True, slots=True)
class RoutingConfig:
    inline_deadline_ms: int = field(
        default=350,
        metadata=key(
            "budget of one keystroke-level request, end to end", check=POSITIVE, editor="free"
        ),
    )
    hedge_after_ms: int = field(
        default=120,
        metadata=key(
            "no first token by then: the next-best endpoint is asked too",
            check=POSITIVE,
            editor="free",
        ),
    )
    refactor_deadline_ms: int = field(
        default=120_000, metadata=key("budget of one refactor", check=POSITIVE, editor="free")
    )
    edit_deadline_ms: int = field(
        default=800,
        metadata=key("budget of one next-edit prediction", check=POSITIVE, editor="free"),
    )
    edit_eagerness: EditEagerness = field(
        default="medium",
        metadata=key(
            "how readily a predicted next edit is shown (high: all but whitespace and ones just "
            "dismissed; low: not far from the cursor nor large)",
            editor="free",
        ),
    )
    offline: OfflineMode = field(
        default="auto",
        metadata=key(
            '"auto": detected; "always": never leave the machine; "never": assume a network',
            editor="stricter",
        ),
    )
    sensitive_globs: tuple[str, ...] = field(
        default=DEFAULT_SENSITIVE_GLOBS,
        metadata=key(
            "paths whose documents stay on the local model (the file's replace the defaults; "
            "an editor's are added)",
            check=NON_EMPTY_ITEMS,
            editor="stricter",
            default="the credential files listed on the privacy page",
        ),
    )
    redact_secrets: bool = field(
        default=True,
        metadata=key(
            "a secret found in what a request would send keeps it on the local model",
            editor="stricter",
        ),
    )
    max_hedge_ratio: float = field(
        default=0.2,
        metadata=key(
            "at most this share of requests is hedged (0 turns hedging off)",
            check=RATIO,
            editor="free",
        ),
    )
    context: bool = field(
        default=True,
        metadata=key(
            "other open and edited files and imported definitions join inline prompts",
            editor="stricter",
        ),
    )
    hedge_tool_calls: bool = field(
        default=False,
        metadata=key("a gateway chat that offers tools may be hedged (a tool may then run twice)"),
    )


# The local models known by name (`[local] model`); backends/model_presets.py describes each.
LOCAL_MODEL_PRESETS: tuple[str, ...] = (
    "gemma-3-270m",
    "qwen2.5-coder-0.5b",
    "qwen2.5-coder-1.5b",
    "qwen2.5-coder-0.5b-base",
    "qwen2.5-coder-1.5b-base",
)
# The best installed preset this machine serves within `deadline_ms`, measured (the default).
LOCAL_MODEL_AUTO = "auto"


def default_threads() -> int:
    """Half the cores, at least one: llama.cpp's threads spin, and one left without a core
    (an editor, a build on a laptop) stalls them all; bench/bench_local.py --sweep-threads
    measures it with one core busy."""
    return max(1, (os.cpu_count() or 2) // 2)


def _local_model_preset(value: str) -> str | None:
    if not value or value == LOCAL_MODEL_AUTO or value in LOCAL_MODEL_PRESETS:
        return None
    known = ", ".join(f'"{name}"' for name in (LOCAL_MODEL_AUTO, *LOCAL_MODEL_PRESETS))
    return f"unknown local model preset {describe(value)}; known: {known}"


LOCAL_MODEL_PRESET = Check(
    _local_model_preset, ", ".join(f'"{n}"' for n in (LOCAL_MODEL_AUTO, *LOCAL_MODEL_PRESETS))
)


@dataclass(frozen=True, slots=True)
class LocalConfig:
    model: str = field(
        default=LOCAL_MODEL_AUTO,
        metadata=key(
            "a local-model preset; auto: the best installed one this machine serves in time; "
            "empty: the bundled default",
            check=LOCAL_MODEL_PRESET,
        ),
    )
    model_path: str = field(
        default="", metadata=key("a .gguf of your own, instead of a preset (not both)")
    )
    n_ctx: int = field(
        default=4096, metadata=key("the local model's context window, in tokens", check=POSITIVE)
    )
    n_threads: int = field(
        default_factory=default_threads,
        metadata=key(
            "threads the local model computes with (0: all cores)",
            check=NOT_NEGATIVE,
            editor="free",
            default="half the cores, at least 1",
        ),
    )
    enabled: bool = field(default=True, metadata=key("the local model is used", editor="free"))
    read_ahead: bool = field(  # off: the model works only when asked (docs/local-models.md)
        default=True, metadata=key("the local model reads a document's prompt ahead while idle")
    )
    # No remote inline endpoint counts too: a CPU model needs longer than a remote's deadline.
    deadline_ms: int = field(
        default=1500,
        metadata=key(
            "budget of a request only the local model can serve (offline, sensitive)",
            check=POSITIVE,
            editor="free",
        ),
    )
    max_tokens: int = field(
        default=32,
        metadata=key(
            "tokens per inline suggestion from the local model", check=POSITIVE, editor="free"
        ),
    )
    # Tokens of context beyond the file in the local model's prompt: a CPU model reads every
    # one of them before its first token, so its budget is small. None: the preset's own
    # (`ModelPreset.context_tokens`, 0 where bench_quality found context no help), and
    # `OWN_MODEL_CONTEXT_TOKENS` for a model_path.
    context_tokens: int | None = field(
        default=None,
        metadata=key(
            "context beyond the file in the local model's prompts, in tokens (an editor may only "
            "lower it)",
            check=CONTEXT_TOKENS,
            editor="stricter",
            default="the preset's own (0 for every preset); 256 for a model_path",
        ),
    )
    tool_calls: LocalToolCalls = field(
        default="auto",
        metadata=key(
            'agents\' tool calls on the local model: "auto" (ChatML templates), "chatml" (any '
            'model), "off"'
        ),
    )
    # A quarter of them at most after the cursor. On bench/bench_quality.py the whole-file
    # window took 1.7x as long cold for no better answers.
    window_tokens: int = field(
        default=768,
        metadata=key(
            "tokens of the file around the cursor per prompt (0: what n_ctx holds)",
            check=NOT_NEGATIVE,
        ),
    )


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float = field(
        default=0.0, metadata=key("dollars per million prompt tokens", check=NOT_NEGATIVE)
    )
    output: float = field(
        default=0.0, metadata=key("dollars per million completion tokens", check=NOT_NEGATIVE)
    )


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    name: str = field(
        metadata=key("the endpoint's name, in decisions and as a gateway model", check=NON_EMPTY)
    )
    kind: EndpointKind = field(metadata=key("the provider's API (see Configuration, the kinds)"))
    base_url: str = field(
        metadata=key("the API's base URL", check=HTTP_URL, default="the kind's, where it has one")
    )
    model: str = field(metadata=key("the model's name at the provider", check=NON_EMPTY))
    api_key_env: str = field(
        default="",
        metadata=key(
            "the environment variable holding the API key (a key in the file is refused)",
            check=ENV_VAR_NAME,
            default="the kind's (INCEPTION_API_KEY, MISTRAL_API_KEY, DEEPSEEK_API_KEY)",
        ),
    )
    roles: tuple[Role, ...] = field(
        default=("inline",),
        metadata=key(
            "what it serves: keystrokes, next edits, refactors, agents' chat with tools",
            check=ROLES,
        ),
    )
    fim: bool = field(
        default=True,
        metadata=key(
            "fill-in-the-middle with prompt and suffix; false: chat with a FIM instruction",
            default="the kind's (false for ollama and anthropic)",
        ),
    )
    fim_path: str = field(
        default="",
        metadata=key("the FIM call's path under base_url", check=URL_PATH, default="the kind's"),
    )
    chat_path: str = field(
        default="",
        metadata=key("the chat call's path under base_url", check=URL_PATH, default="the kind's"),
    )
    responses_path: str = field(
        default="",
        metadata=key(
            "the upstream's Responses API path: /v1/responses passes through to it", check=URL_PATH
        ),
    )
    edit_format: EditFormat = field(
        default="",
        metadata=key(
            "how next edits are asked", default='the kind\'s ("mercury" for inception, else "chat")'
        ),
    )
    edit_path: str = field(
        default="",
        metadata=key("where next edits go under base_url", check=URL_PATH, default="the format's"),
    )
    max_tokens: int = field(
        default=64,
        metadata=key(
            "tokens per inline or refactor answer",
            check=POSITIVE,
            default="64; 4096 without the inline role",
        ),
    )
    context_tokens: int = field(
        default=1024,
        metadata=key(
            "context beyond the file in its inline prompts, in tokens",
            check=CONTEXT_TOKENS,
            default="the kind's: 1024, 0 for llamacpp",
        ),
    )
    chat_max_tokens: int = field(
        default=8192,
        metadata=key("gateway chat: the client's max_tokens up to this", check=POSITIVE),
    )
    timeout_ms: int = field(
        default=2000,
        metadata=key(
            "per read; endpoints with the refactor role wait at least 300 s", check=POSITIVE
        ),
    )
    price_per_mtok: Price = field(
        default_factory=Price,
        metadata=key("the price per million tokens, for budgets and usage", default="0"),
    )

    def api_key(self) -> str | None:
        """The key, read from the environment at call time; never stored or logged."""
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or None


BudgetPeriod = Literal["day", "month"]
# What a gateway does about budgets while the shared state is unreachable: "closed" refuses
# requests of clients with a budget, "open" lets them through uncounted.
BudgetWhenStateDown = Literal["closed", "open"]


@dataclass(frozen=True, slots=True)
class Limits:
    """One gateway client's limits; None: no limit of that kind."""

    rpm: int | None = field(
        default=None, metadata=key("requests per minute", check=POSITIVE, default="no limit")
    )
    tpm: int | None = field(
        default=None,
        metadata=key(
            "tokens per minute, prompt and completion", check=POSITIVE, default="no limit"
        ),
    )
    max_concurrent: int | None = field(
        default=None, metadata=key("requests in flight", check=POSITIVE, default="no limit")
    )
    budget_usd: float | None = field(
        default=None,
        metadata=key(
            "spend per period, at the endpoints' price_per_mtok",
            check=NOT_NEGATIVE,
            default="no limit",
        ),
    )
    budget_period: BudgetPeriod = field(
        default="day", metadata=key("the budget's period, a UTC calendar day or month")
    )


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    host: str = field(default="127.0.0.1", metadata=key("bind address", check=NON_EMPTY))
    port: int = field(default=11435, metadata=key("port", check=PORT))
    # Bearer tokens, required when binding beyond loopback. Each variable named here holds one
    # client's token, and the client is known by the variable's name; `token_file` names a file
    # of `client-name token` lines. The file accepts one name or an array for `token_env`.
    token_env: tuple[str, ...] = field(
        default=(),
        metadata=key(
            "the variables holding bearer tokens, one client each (one name or an array); "
            "required beyond loopback",
            check=ENV_VAR_NAMES,
        ),
    )
    token_file: str = field(
        default="", metadata=key("a file of `client-name token` lines, one client per line")
    )
    state_url: str = field(
        default="",
        metadata=key("Redis where gateways share routing state and limits", check=STATE_URL),
    )
    state_password_env: str = field(
        default="",
        metadata=key("the variable holding the Redis password, if any", check=ENV_VAR_NAME),
    )
    # What a slow or stalled client may hold: a request's head and body must arrive in time,
    # and one address may keep only so many connections waiting for a head (its oldest such
    # connection is closed past that).
    header_timeout_ms: int = field(
        default=10_000,
        metadata=key("a request's line and headers must arrive within this", check=POSITIVE),
    )
    body_timeout_ms: int = field(
        default=30_000, metadata=key("a request's body must arrive within this", check=POSITIVE)
    )
    max_connections: int = field(
        default=2048, metadata=key("beyond this, requests are answered 503", check=POSITIVE)
    )
    max_half_open_per_ip: int = field(
        default=32,
        metadata=key("connections one address may keep waiting for a request head", check=POSITIVE),
    )
    # Limits per client: `default_limits` for every client without a table in `clients`
    # (keyed by the client's name: its token variable, or its name in the token file).
    default_limits: Limits = field(
        default_factory=Limits,
        metadata=key("limits of every client without a table of its own", default="no limit"),
    )
    clients: dict[str, Limits] = field(
        default_factory=dict,
        metadata=key(
            "limits per client, by its token variable's or token-file name", default="none"
        ),
    )
    budget_when_state_down: BudgetWhenStateDown = field(
        default="closed",
        metadata=key('budgets while Redis is unreachable: "closed" refuses, "open" lets through'),
    )
    metrics_public: bool = field(
        default=False, metadata=key("GET /metrics answers without a bearer token")
    )

    def limits_of(self, client: str) -> Limits:
        return self.clients.get(client, self.default_limits)


@dataclass(frozen=True, slots=True)
class Config:
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    endpoints: tuple[EndpointConfig, ...] = ()
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    source: Path | None = None  # the file it came from, if any

    def endpoints_with_role(self, role: Role) -> tuple[EndpointConfig, ...]:
        return tuple(e for e in self.endpoints if role in e.roles)

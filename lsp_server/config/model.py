"""The configuration model: what `config.toml` (and the editor's `gatewayLs` settings) describe.

Loading, validation and hot reload live in `config_loader` and `config_watch`; this module is
only the typed shape with its defaults, so every other module can depend on it cheaply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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
# the last edit or rewrite what is being typed; "low" also edits far from the cursor or large.
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
    inline_deadline_ms: int = 350
    hedge_after_ms: int = 120
    refactor_deadline_ms: int = 120_000
    # Budget of one next-edit prediction from remote endpoints (the local model has its own).
    edit_deadline_ms: int = 800
    edit_eagerness: EditEagerness = "medium"
    offline: OfflineMode = "auto"
    sensitive_globs: tuple[str, ...] = DEFAULT_SENSITIVE_GLOBS
    redact_secrets: bool = True
    # Share of inline requests that may be hedged; bounds the extra traffic hedging costs.
    max_hedge_ratio: float = 0.2
    # Other open and edited files and the definitions of imported names join inline prompts
    # (never a sensitive file, never a piece holding a secret).
    context: bool = True
    # A gateway chat that offers tools may be hedged only when this is true: a hedged request
    # whose both answers call a tool would have the agent run it twice.
    hedge_tool_calls: bool = False


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


@dataclass(frozen=True, slots=True)
class LocalConfig:
    # "auto", a name from LOCAL_MODEL_PRESETS, or empty for the bundled default; model_path wins
    model: str = LOCAL_MODEL_AUTO
    model_path: str = ""  # a .gguf of the user's own, instead of a preset
    n_ctx: int = 4096
    n_threads: int = field(default_factory=default_threads)  # 0: all cores
    enabled: bool = True
    # Budget of an inline request only the local model can serve (offline, sensitive, no remote
    # inline endpoint): a CPU model needs longer than a keystroke deadline made for remotes.
    deadline_ms: int = 1500
    max_tokens: int = 32  # inline suggestions from the local model
    # Tokens of context beyond the file in the local model's prompt: a CPU model reads every
    # one of them before its first token, so its budget is small. None: the preset's own
    # (`ModelPreset.context_tokens`, 0 where bench_quality found context no help), and
    # `OWN_MODEL_CONTEXT_TOKENS` for a model_path.
    context_tokens: int | None = None
    # Tool calls for gateway chat that must stay local: "auto" when the model's chat template
    # is ChatML, "chatml" for any model (llama-cpp-python's ChatML function calling), "off".
    tool_calls: LocalToolCalls = "auto"
    # Tokens of the current file around the cursor (a quarter of them at most after it); 0: as
    # many as n_ctx holds. Every one is read on a document's first suggestion: on
    # bench/bench_quality.py the whole-file window took 1.7x as long cold for no better answers.
    window_tokens: int = 768


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    name: str
    kind: EndpointKind
    base_url: str
    model: str
    api_key_env: str = ""
    roles: tuple[Role, ...] = ("inline",)
    fim: bool = True
    # Paths under base_url; empty: the kind's documented path (config/providers.py).
    fim_path: str = ""
    chat_path: str = ""
    # The upstream speaks the Responses API at this path: the gateway's `/v1/responses` passes
    # requests for this endpoint through instead of bridging them onto chat completions.
    responses_path: str = ""
    # Next-edit predictions (role "edit"): the prompt format and the path it is sent to;
    # empty: the kind's (config/providers.py).
    edit_format: EditFormat = ""
    edit_path: str = ""
    max_tokens: int = 64  # inline suggestions and refactor answers
    # Context beyond the file in this endpoint's inline prompts; a file that sets none gets
    # its kind's (config/providers.py: 1024, `llamacpp` 0).
    context_tokens: int = 1024
    # Gateway chat: the client's max_tokens is sent up to this cap (and this when it sent none).
    chat_max_tokens: int = 8192
    timeout_ms: int = 2000
    price_per_mtok: Price = field(default_factory=Price)

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

    rpm: int | None = None  # requests per minute
    tpm: int | None = None  # tokens per minute, prompt and completion
    max_concurrent: int | None = None  # requests in flight
    budget_usd: float | None = None  # spend per period, from the endpoints' price_per_mtok
    budget_period: BudgetPeriod = "day"  # UTC calendar periods


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 11435
    # Bearer tokens, required when binding beyond loopback. Each variable named here holds one
    # client's token, and the client is known by the variable's name; `token_file` names a file
    # of `client-name token` lines. The file accepts one name or an array for `token_env`.
    token_env: tuple[str, ...] = ()
    token_file: str = ""
    # "redis://host:6379/0" (or rediss://): gateways share latency samples, breakers and the
    # hedge budget there; the password is read from the variable `state_password_env` names.
    state_url: str = ""
    state_password_env: str = ""
    # What a slow or stalled client may hold: a request's head and body must arrive in time,
    # and one address may keep only so many connections waiting for a head (its oldest such
    # connection is closed past that).
    header_timeout_ms: int = 10_000
    body_timeout_ms: int = 30_000
    max_connections: int = 2048
    max_half_open_per_ip: int = 32
    # Limits per client: `default_limits` for every client without a table in `clients`
    # (keyed by the client's name: its token variable, or its name in the token file).
    default_limits: Limits = field(default_factory=Limits)
    clients: dict[str, Limits] = field(default_factory=dict)
    budget_when_state_down: BudgetWhenStateDown = "closed"
    metrics_public: bool = False  # GET /metrics without a bearer token

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

"""The names a client may give a model, and what a name resolves to: the one place for both.

`gateway-ls` and `auto` route automatically, `fast`, `reasoning` and `local` are chat task
classes, and `local` names the model in this process; no endpoint may take a name that
routing, status and the gateway's model list use for these (`RESERVED_ENDPOINT_NAMES`).

Every front door resolves a name here: the gateway's completions and chats, `/v1/models`, and
`gateway-ls complete --endpoint`, and the chat route plans with it. A name that resolves to
nothing is `Refused` with the names that would have: `model_not_found`, or
`model_not_supported` for an endpoint without the role.
"""

from __future__ import annotations

from lsp_server.config.model import Config, Role
from lsp_server.failures import RefusalCode, Refused

SERVER_MODEL = "gateway-ls"
AUTO = "auto"
LOCAL = "local"
AUTOMATIC_MODELS = (SERVER_MODEL, AUTO)  # model names that mean "route automatically"
TASK_CLASSES = (AUTO, "fast", "reasoning", LOCAL)
RESERVED_ENDPOINT_NAMES = frozenset({LOCAL, SERVER_MODEL, AUTO})

_SERVES = {"inline": "completions", "refactor": "refactors", "agent": "agents' chat"}


def listed_models(config: Config) -> list[str]:
    """What `/v1/models` lists: the automatic name, the task classes, then every endpoint. An
    endpoint named like a class takes the name (the configuration's word is the more
    specific)."""
    endpoints = [e.name for e in config.endpoints]
    return [SERVER_MODEL, *(c for c in TASK_CLASSES if c not in endpoints), *endpoints]


def pinned_endpoint(config: Config, model: str, role: Role) -> str | None:
    """The endpoint `model` pins a request of `role` to; None routes automatically (no model,
    `gateway-ls` or `auto`). `local` pins the local model when it is enabled."""
    if not model or model in AUTOMATIC_MODELS:
        return None
    if model == LOCAL and config.local.enabled:
        return LOCAL
    endpoint = next((e for e in config.endpoints if e.name == model), None)
    if endpoint is None:
        raise unknown_model(config, model, role)
    if role not in endpoint.roles:
        raise Refused(
            RefusalCode.MODEL_NOT_SUPPORTED,
            f"endpoint {model!r} does not serve {_SERVES.get(role, role)} (its roles: "
            f"{', '.join(endpoint.roles)}); use model {AUTO!r} to route automatically",
        )
    return endpoint.name


def unknown_model(config: Config, model: str, role: Role) -> Refused:
    """`model` names nothing here: the refusal lists what would serve `role`."""
    if role == "inline":
        names = [*AUTOMATIC_MODELS, *(e.name for e in config.endpoints if role in e.roles)]
        if config.local.enabled:
            names.append(LOCAL)
    else:
        names = [AUTOMATIC_MODELS[0], *listed_models(config)[1:]]
    return Refused(
        RefusalCode.MODEL_NOT_FOUND,
        f"the model {model!r} does not exist here; use one of: {', '.join(names)}",
        tuple(names),
    )

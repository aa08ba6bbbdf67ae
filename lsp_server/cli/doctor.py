"""`gateway-ls doctor`: is the configuration sound, does each endpoint answer the call the router
will make, does the local model load?

Per endpoint: the router's own call through the endpoint's backend (the FIM call or the chat
call, asking for one token, with a fixed probe text and no document content), plus the model
list where the API has one. A model list that answers while completions fail shows as failing,
with a hint at the usual cause. Exit 1 when any configured endpoint fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from lsp_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
)
from lsp_server.backends.factory import local_backend_factory, remote_backend
from lsp_server.cli.local_choice import print_local_choice
from lsp_server.cli.table import render_table
from lsp_server.config.loader import missing_api_keys
from lsp_server.config.model import Config, EndpointConfig
from lsp_server.config.providers import chat_path, fim_path
from lsp_server.failures import FailureKind
from lsp_server.permit import Permit
from lsp_server.progress import StderrProgress
from lsp_server.routing.gate import Gate, StaysHome

PROBE_TIMEOUT_S = 10.0
# What the probe asks: fixed text, never anything of the user's.
PROBE_PREFIX = "def add(a, b):\n    return "
PROBE_SUFFIX = "\n"
PROBE_CHAT = (ChatMessage("user", "Reply with the word ok."),)
OFFLINE_ALWAYS = (
    'offline = "always": nothing leaves this machine, not even this check; '
    "every request is answered by the local model"
)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    name: str
    kind: str
    model: str
    roles: str
    call: str
    status: str
    latency_ms: float | None
    model_listed: str
    ok: bool
    hint: str = ""


def run_doctor(
    config: Config, *, load_local: bool, recalibrate: bool = False, as_json: bool = False
) -> int:
    source = str(config.source or "none (defaults: the bundled local model alone)")
    warnings = [
        f"{endpoint}: environment variable {variable} is not set"
        for endpoint, variable in missing_api_keys(config)
    ]
    results = asyncio.run(_probe_all(config, load_local=load_local))
    exit_code = 0 if results and all(r.ok for r in results) else 1
    if as_json:
        # What an editor's health check reads (clients/neovim/lua/gateway_ls/health.lua).
        endpoints = [dataclasses.asdict(r) for r in results]
        print(json.dumps({"configuration": source, "warnings": warnings, "endpoints": endpoints}))
        return exit_code
    print(f"configuration: {source}")
    for warning in warnings:
        print(f"warning: {warning}")
    print(
        render_table(
            ["endpoint", "kind", "model", "roles", "call", "status", "latency ms", "model listed"],
            [
                (r.name, r.kind, r.model, r.roles, r.call, r.status, r.latency_ms, r.model_listed)
                for r in results
            ],
        )
    )
    for result in results:
        if result.hint:
            print(f"hint: {result.name}: {result.hint}")
    if config.local.enabled and load_local:
        print_local_choice(config.local, recalibrate=recalibrate)
    return exit_code


async def _probe_all(config: Config, *, load_local: bool) -> list[ProbeResult]:
    gate = Gate(lambda: config.routing.offline)  # the router's own rule, for its own calls
    async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:
        remote = await asyncio.gather(*(_probe(client, e, gate) for e in config.endpoints))
    results = list(remote)
    if config.local.enabled and load_local:
        results.append(await _probe_local(config, gate))
    elif config.local.enabled:
        results.append(
            ProbeResult("local", "local", "-", "all", "-", "not loaded", None, "-", True)
        )
    return results


async def _probe(client: httpx.AsyncClient, endpoint: EndpointConfig, gate: Gate) -> ProbeResult:
    roles = ",".join(endpoint.roles)
    inline = "inline" in endpoint.roles
    fim = inline and endpoint.fim
    call = f"FIM {fim_path(endpoint)}" if fim else f"chat {chat_path(endpoint)}"

    def result(
        status: str, latency: float | None, listed: str, ok: bool, hint: str = ""
    ) -> ProbeResult:
        return ProbeResult(
            endpoint.name,
            endpoint.kind,
            endpoint.model,
            roles,
            call,
            status,
            latency,
            listed,
            ok,
            hint,
        )

    try:
        permit = gate.contentless(endpoint.name)
    except StaysHome as refused:
        # Nothing leaves the machine, not even this check: said, and not a failure.
        return result(f"not called: {refused.reason.value}", None, "-", True, OFFLINE_ALWAYS)
    if endpoint.api_key_env and endpoint.api_key() is None:
        hint = f"export {endpoint.api_key_env} with the key of this endpoint"
        return result(f"no key (${endpoint.api_key_env} unset)", None, "?", False, hint)
    listed = await _model_listed(client, endpoint, permit)
    backend = remote_backend(endpoint)
    started = time.perf_counter()
    try:
        await asyncio.wait_for(_tiny_call(backend, inline, permit), PROBE_TIMEOUT_S)
        if inline and "refactor" in endpoint.roles:
            await asyncio.wait_for(_tiny_call(backend, False, permit), PROBE_TIMEOUT_S)
    except BackendError as error:
        latency = (time.perf_counter() - started) * 1000
        status = f"failed: {error.kind.value}: {error.message}"
        return result(status, latency, listed, False, _hint(endpoint, error, listed))
    except TimeoutError:
        return result("failed: no answer", None, listed, False, "no answer within 10 s")
    finally:
        await backend.aclose()
    latency = (time.perf_counter() - started) * 1000
    return result("ok", latency, listed, True)


async def _tiny_call(backend: Backend, inline: bool, permit: Permit) -> None:
    """The router's call for the role, asking for one token."""
    if inline:
        request = CompletionRequest(prefix=PROBE_PREFIX, suffix=PROBE_SUFFIX, max_tokens=1)
        stream = backend.complete(request, permit=permit)
    else:
        stream = backend.chat(ChatRequest(messages=PROBE_CHAT, max_tokens=1), permit=permit)
    async for _ in stream:
        pass


def _hint(endpoint: EndpointConfig, error: BackendError, listed: str) -> str:
    path = urlsplit(endpoint.base_url).path.rstrip("/")
    openai_like = endpoint.kind in ("openai", "ollama")
    if error.kind is FailureKind.AUTH:
        variable = endpoint.api_key_env or "api_key_env"
        return f"the key was refused: check that {variable} holds a valid key for this endpoint"
    if error.kind is FailureKind.NOT_FOUND:
        if openai_like and not path.endswith("/v1"):
            return f"base_url usually ends in /v1 (got {endpoint.base_url!r})"
        if listed == "no":
            return f"the endpoint does not list the model {endpoint.model!r}: check model"
        return f"wrong model or path: check model and {'fim_path' if endpoint.fim else 'chat_path'}"
    if error.kind is FailureKind.PROTOCOL and error.status in (400, 422):
        if listed == "no":
            return f"the endpoint does not list the model {endpoint.model!r}: check model"
        return "the request was refused: check model (a FIM model may not chat) and fim"
    if error.kind is FailureKind.NETWORK:
        return "nothing answers at base_url: is the server running, is the address right?"
    if error.kind is FailureKind.TIMEOUT:
        return "no answer within timeout_ms"
    return ""


async def _model_listed(client: httpx.AsyncClient, endpoint: EndpointConfig, permit: Permit) -> str:
    """ "yes" / "no" when the endpoint lists its models, "?" when it does not say."""
    permit.check_remote(endpoint.name)
    headers: dict[str, str] = {}
    key = endpoint.api_key()
    if key is not None:
        if endpoint.kind == "anthropic":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        else:
            headers = {"Authorization": f"Bearer {key}"}
    base = endpoint.base_url.rstrip("/")
    url = f"{base}/v1/models" if endpoint.kind in ("anthropic", "llamacpp") else f"{base}/models"
    try:
        response = await client.get(url, headers=headers)
    except httpx.HTTPError:
        return "?"
    if response.status_code >= 400:
        return "?"
    try:
        payload = response.json()
        data = payload.get("data") or payload.get("models") or []
    except (ValueError, AttributeError):
        return "?"
    names = {str(m.get("id") or m.get("name") or "") for m in data if isinstance(m, dict)}
    if not names:
        return "?"
    return "yes" if endpoint.model in names else "no"


async def _probe_local(config: Config, gate: Gate) -> ProbeResult:
    backend = local_backend_factory(StderrProgress())(config.local)
    started = time.perf_counter()
    try:
        await backend.ensure_loaded()
        loaded_ms = (time.perf_counter() - started) * 1000
        request = CompletionRequest(prefix="def add(a, b):\n    return", suffix="", max_tokens=8)
        permit = gate.permit("local", remote=False, held=None)
        generated = "".join([chunk async for chunk in backend.complete(request, permit=permit)])
        status = f"ok (loaded in {loaded_ms:.0f} ms, wrote {len(generated)} chars)"
        model = str(backend.model_path or "bundled")
        return ProbeResult("local", "local", model, "all", "-", status, loaded_ms, "-", True)
    except BackendError as error:
        print(f"local model: {error.message}", file=sys.stderr)
        return ProbeResult("local", "local", "-", "all", "-", "failed to load", None, "-", False)
    finally:
        await backend.aclose()

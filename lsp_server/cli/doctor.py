"""`gateway-ls doctor`: is the configuration sound, does each endpoint answer, does the local
model load? Probes carry no document content: a `GET …/models` per endpoint."""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass

import httpx

from lsp_server.backends.base import BackendError, CompletionRequest
from lsp_server.backends.factory import local_backend_factory
from lsp_server.cli.table import render_table
from lsp_server.config.loader import missing_api_keys
from lsp_server.config.model import Config, EndpointConfig
from lsp_server.progress import StderrProgress

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ProbeResult:
    name: str
    kind: str
    model: str
    roles: str
    status: str
    latency_ms: float | None
    model_listed: str
    ok: bool


def run_doctor(config: Config, *, load_local: bool) -> int:
    source = config.source or "none (defaults: the bundled local model alone)"
    print(f"configuration: {source}")
    for endpoint, variable in missing_api_keys(config):
        print(f"warning: {endpoint}: environment variable {variable} is not set")
    results = asyncio.run(_probe_all(config, load_local=load_local))
    print(
        render_table(
            ["endpoint", "kind", "model", "roles", "status", "latency ms", "model listed"],
            [
                (r.name, r.kind, r.model, r.roles, r.status, r.latency_ms, r.model_listed)
                for r in results
            ],
        )
    )
    return 0 if any(r.ok for r in results) else 1


async def _probe_all(config: Config, *, load_local: bool) -> list[ProbeResult]:
    async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:
        remote = await asyncio.gather(*(_probe(client, e) for e in config.endpoints))
    results = list(remote)
    if config.local.enabled and load_local:
        results.append(await _probe_local(config))
    elif config.local.enabled:
        results.append(ProbeResult("local", "local", "-", "all", "not loaded", None, "-", True))
    return results


async def _probe(client: httpx.AsyncClient, endpoint: EndpointConfig) -> ProbeResult:
    roles = ",".join(endpoint.roles)

    def result(status: str, latency: float | None, listed: str, ok: bool) -> ProbeResult:
        return ProbeResult(
            endpoint.name, endpoint.kind, endpoint.model, roles, status, latency, listed, ok
        )

    headers: dict[str, str] = {}
    key = endpoint.api_key()
    if endpoint.api_key_env and key is None:
        return result(f"no key (${endpoint.api_key_env} unset)", None, "?", False)
    if key is not None:
        if endpoint.kind == "anthropic":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        else:
            headers = {"Authorization": f"Bearer {key}"}
    base = endpoint.base_url.rstrip("/")
    url = f"{base}/v1/models" if endpoint.kind == "anthropic" else f"{base}/models"
    started = time.perf_counter()
    try:
        response = await client.get(url, headers=headers)
    except httpx.HTTPError as error:
        return result(f"unreachable: {type(error).__name__}", None, "?", False)
    latency = (time.perf_counter() - started) * 1000
    if response.status_code in (401, 403):
        return result(f"auth failed (HTTP {response.status_code})", latency, "?", False)
    if response.status_code >= 400:
        return result(f"HTTP {response.status_code}", latency, "?", False)
    listed = _model_listed(response, endpoint.model)
    return result("ok", latency, listed, listed != "no")


def _model_listed(response: httpx.Response, model: str) -> str:
    try:
        data = response.json().get("data") or response.json().get("models") or []
    except (ValueError, AttributeError):
        return "?"
    names = {str(m.get("id") or m.get("name") or "") for m in data if isinstance(m, dict)}
    if not names:
        return "?"
    return "yes" if model in names else "no"


async def _probe_local(config: Config) -> ProbeResult:
    backend = local_backend_factory(StderrProgress())(config.local)
    started = time.perf_counter()
    try:
        await backend.ensure_loaded()  # type: ignore[attr-defined]
        loaded_ms = (time.perf_counter() - started) * 1000
        request = CompletionRequest(prefix="def add(a, b):\n    return", suffix="", max_tokens=8)
        generated = "".join([chunk async for chunk in backend.complete(request)])
        status = f"ok (loaded in {loaded_ms:.0f} ms, wrote {len(generated)} chars)"
        model = str(getattr(backend, "model_path", "") or "bundled")
        return ProbeResult("local", "local", model, "all", status, loaded_ms, "-", True)
    except BackendError as error:
        print(f"local model: {error.message}", file=sys.stderr)
        return ProbeResult("local", "local", "-", "all", "failed to load", None, "-", False)
    finally:
        await backend.aclose()

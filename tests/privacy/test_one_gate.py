"""Routing rule 1 tried in combinations: one gate decides, on every route and front door.

Hypothesis draws a route and the door it comes through (the core's services, as the LSP front
door and `gateway-ls complete` call them, or the gateway's HTTP app), the offline mode (set in
the file, or at run time as `gatewayLs.setOffline` sets it), whether the document's path is
sensitive, and where a secret from the credential corpus sits: in what the request is about,
in a piece that only adds context (another open document), in another document's edit
history, or nowhere. One recording upstream serves every role. Where the rule says home, not a
byte of the document reaches it (under offline "always", no request at all); where the request
is clean, the document does reach it, and a secret in an optional piece never does.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.credential_corpus import Sample, load_corpus
from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.factory import remote_backend
from lsp_server.config.loader import load_config_file
from lsp_server.config.model import OfflineMode
from lsp_server.core.engine import Engine
from lsp_server.failures import Refused, RouteFailed
from lsp_server.gateway.app import create_app
from lsp_server.refactor.service import RefactorFailed
from tests.support.next_edit_engine import LocalStandIn

Route = Literal["inline", "next-edit", "chat", "chat-stream", "responses", "refactor"]
Door = Literal["core", "gateway"]
Secret = Literal["required", "optional", "other-history", "none"]

# Which door each route comes through, and where a secret can sit in it.
DOORS: dict[Route, tuple[Door, ...]] = {
    "inline": ("core", "gateway"),
    "next-edit": ("core",),
    "chat": ("gateway",),
    "chat-stream": ("gateway",),
    "responses": ("gateway",),
    "refactor": ("core",),
}
PLACES: dict[Route, tuple[Secret, ...]] = {
    "inline": ("required", "optional", "none"),
    "next-edit": ("required", "other-history", "none"),
    "chat": ("required", "none"),
    "chat-stream": ("required", "none"),
    "responses": ("required", "none"),
    "refactor": ("required", "none"),
}
# Secrets the detector finds, one line each, so each can sit on a line of code.
SECRETS = [s for s in load_corpus() if s.kind is not None and "\n" not in s.text.strip() and s.text]
_markers = itertools.count()


@dataclass(frozen=True)
class Case:
    route: Route
    door: Door
    mode: OfflineMode
    at_run_time: bool
    sensitive: bool
    secret: Secret
    sample: Sample

    @property
    def stays_home(self) -> bool:
        return self.mode == "always" or self.sensitive or self.secret == "required"


@st.composite
def cases(draw: st.DrawFn) -> Case:
    route: Route = draw(st.sampled_from(list(DOORS)))
    return Case(
        route=route,
        door=draw(st.sampled_from(DOORS[route])),
        mode=draw(st.sampled_from(["auto", "always", "never"])),
        at_run_time=draw(st.booleans()),
        sensitive=draw(st.booleans()),
        secret=draw(st.sampled_from(PLACES[route])),
        sample=draw(st.sampled_from(SECRETS)),
    )


def _engine(tmp: Path, upstream: FakeLLMServer, case: Case) -> Engine:
    file_mode = "never" if case.at_run_time else case.mode
    path = tmp / "config.toml"
    path.write_text(
        f'[routing]\noffline = "{file_mode}"\ninline_deadline_ms = 5000\n'
        "edit_deadline_ms = 5000\nhedge_after_ms = 4000\n"
        '[[endpoints]]\nname = "remote"\nkind = "openai"\n'
        f'base_url = "{upstream.base_url}"\nmodel = "m"\n'
        'roles = ["inline", "edit", "refactor", "agent"]\n',
        encoding="utf-8",
    )
    engine = Engine(
        load_config_file(path),
        local_factory=lambda _: LocalStandIn(),
        remote_factory=remote_backend,
    )
    if case.at_run_time:
        engine.router.set_offline(case.mode)
    return engine


def _document(marker: str, secret_line: str) -> tuple[str, int]:
    """A document about `marker`, the secret line (if any) just above the cursor's line."""
    lines = [
        "import math",
        "",
        f"def {marker}(items):",
        "    total = 0",
        "    for item in items:",
        "        total += math.fabs(item)",
    ]
    if secret_line:
        lines.append("    " + secret_line.strip())
    text = "\n".join(lines) + "\n    \n"
    return text, len(text) - 1


async def _ask(engine: Engine, case: Case, tmp: Path, marker: str) -> None:
    folder = tmp / ("secrets" if case.sensitive else "src")
    uri = (folder / f"{marker}.py").as_uri()
    secret = case.sample.text if case.secret == "required" else ""
    text, cursor = _document(marker, secret)
    if case.secret == "optional":
        other = (tmp / "src" / "settings.py").as_uri()
        engine.context.set_workspace_folders([tmp.as_uri()])
        engine.context.opened(other, f"# items total\n{case.sample.text}\n", "python")
        engine.context.gather_now()
        await engine.context.settled()
    if case.door == "gateway":
        await _through_the_gateway(engine, case, uri, text, cursor)
        return
    with contextlib.suppress(Refused, RouteFailed, RefactorFailed):
        if case.route == "inline":
            await engine.suggestions.suggest(uri=uri, text=text, offset=cursor, language="python")
        elif case.route == "next-edit":
            if case.secret == "other-history":
                notes = (tmp / "src" / "notes.py").as_uri()
                engine.next_edits.opened(notes, "# notes\n")
                engine.next_edits.changed(notes, f"# notes\n{case.sample.text}\n", 1)
            engine.next_edits.opened(uri, text.replace("total = 0", "total = 1"))
            engine.next_edits.changed(uri, text, 3)
            await engine.next_edits.predict(uri=uri, text=text, offset=cursor, language="python")
        else:
            await engine.refactors.refactor(
                uri=uri, text=text, start=0, end=len(text), language="python", instruction=""
            )


async def _through_the_gateway(
    engine: Engine, case: Case, uri: str, text: str, cursor: int
) -> None:
    headers = {"x-gateway-ls-path": uri}
    if case.route == "inline":
        path = "/v1/completions"
        body: dict[str, object] = {
            "model": "auto",
            "prompt": text[:cursor],
            "suffix": text[cursor:],
            "max_tokens": 8,
        }
    elif case.route == "responses":
        path, body = "/v1/responses", {"model": "auto", "input": f"Explain:\n{text}"}
    else:
        path = "/v1/chat/completions"
        body = {
            "model": "auto",
            "messages": [{"role": "user", "content": f"Explain:\n{text}"}],
            "stream": case.route == "chat-stream",
        }
    app = create_app(engine, clients=None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post(path, json=body, headers=headers, timeout=30)
        await response.aread()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=cases())
async def test_one_gate_decides_on_every_route(
    case: Case, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each example has an upstream of its own: a warm-up connection of the one before, still
    on its way, is not counted against it."""
    tmp = tmp_path_factory.mktemp("gate")
    marker = f"gate_marker_{next(_markers)}"
    with FakeLLMServer(Behaviour(text="    return total\n")) as upstream:
        engine = _engine(tmp, upstream, case)
        try:
            await _ask(engine, case, tmp, marker)
        finally:
            await engine.aclose()
    received = upstream.received_text()
    secret_lines = [line.strip() for line in case.sample.text.splitlines() if line.strip()]
    if case.mode == "always":
        assert upstream.requests == [], case
        if not case.at_run_time:  # nothing at all, not even a warm-up connection
            assert upstream.model_list_requests == 0 and upstream.bytes_received == 0, case
    if case.stays_home:
        assert marker not in received, case
    else:
        assert marker in received, case
    if case.secret != "none":
        assert not any(line in received for line in secret_lines), case

"""An endpoint over HTTPS: the test server behind a certificate from a certificate authority of
the test's own (trustme), trusted the way a user trusts a private one (`SSL_CERT_FILE`), on
asyncio's loop and on uvloop (what the server and the gateway run on). The backends' connections
go through `asyncio_network`, which upgrades them with the loop's own TLS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.permits import permit_for
from lsp_server.backends import http_client
from lsp_server.backends.base import (
    BackendError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Usage,
)
from lsp_server.backends.factory import remote_backend
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.failures import FailureKind
from tests.support.provider_endpoints import collect, endpoint

ANSWER = "return a + b\n"
LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {
    "asyncio": asyncio.run,
    "uvloop": run_on_fastest_loop,
}


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def https_server(directory: Path, authority: trustme.CA, *names: str) -> FakeLLMServer:
    certificate = directory / f"server-{'-'.join(names)}.pem"
    authority.issue_cert(*names).private_key_and_cert_chain_pem.write_to_path(str(certificate))
    return FakeLLMServer(Behaviour(text=ANSWER), name="tls", certificate=certificate)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, authority: trustme.CA
) -> Iterator[FakeLLMServer]:
    with https_server(tmp_path_factory.mktemp("tls"), authority, "127.0.0.1") as running:
        yield running


@pytest.fixture
def trusted(
    tmp_path: Path, authority: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """The test's authority is the one the backends trust, as `SSL_CERT_FILE` makes it."""
    bundle = tmp_path / "authority.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    http_client._ssl_context.cache_clear()  # the context is loaded once per process
    yield
    monkeypatch.undo()
    http_client._ssl_context.cache_clear()


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.usefixtures("trusted")
def test_a_keystroke_and_a_streamed_chat_over_tls(server: FakeLLMServer, loop: str) -> None:
    server.quiet()
    assert server.base_url.startswith("https://")
    backend = remote_backend(endpoint("openai", server.base_url, "fim = true\n"))
    keystroke = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n")
    chat = ChatRequest(messages=(ChatMessage("user", "add two numbers"),), max_tokens=32)
    usage = Usage()

    async def both() -> tuple[str, str]:
        try:
            completed = await collect(backend.complete(keystroke, permit=permit_for(backend)))
            chatted = await collect(backend.chat(chat, usage, permit=permit_for(backend)))
            return completed, chatted
        finally:
            await backend.aclose()

    assert LOOPS[loop](both()) == (ANSWER, ANSWER)
    assert [r.path for r in server.requests] == ["/v1/completions", "/v1/chat/completions"]
    assert all(r.payload["stream"] is True for r in server.requests)
    assert usage.completion_tokens > 0 and usage.finish_reason == "stop"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_certificate_from_an_authority_not_trusted_is_refused_in_words(
    server: FakeLLMServer, loop: str
) -> None:
    """The machine's own authorities (certifi's) do not include the test's."""
    http_client._ssl_context.cache_clear()
    message = refused(server, loop)
    assert "TLS certificate was refused" in message
    assert "unable to get local issuer certificate" in message
    assert "SSL_CERT_FILE" in message


@pytest.mark.usefixtures("trusted")
def test_a_certificate_for_another_name_is_refused(tmp_path: Path, authority: trustme.CA) -> None:
    with https_server(tmp_path, authority, "upstream.example") as elsewhere:
        message = refused(elsewhere, "uvloop")
        assert elsewhere.requests == []
    assert "TLS certificate was refused" in message
    assert "mismatch" in message  # "IP address mismatch, certificate is not valid for ..."


def refused(server: FakeLLMServer, loop: str) -> str:
    backend = remote_backend(endpoint("openai", server.base_url, "fim = true\n"))

    async def keystroke() -> str:
        try:
            await collect(
                backend.complete(
                    CompletionRequest(prefix="x = ", suffix=""), permit=permit_for(backend)
                )
            )
        except BackendError as error:
            assert error.kind is FailureKind.NETWORK
            return error.message
        finally:
            await backend.aclose()
        raise AssertionError("an untrusted certificate was accepted")

    message: str = LOOPS[loop](keystroke())
    return message


@pytest.mark.usefixtures("trusted")
def test_opening_a_connection_is_timed_apart_from_the_model_and_reusing_one_is_not(
    server: FakeLLMServer,
) -> None:
    """The TCP connect and the TLS handshake of a new connection are noted as set-up time, which
    the router takes off the model's latency; a call on a kept connection notes none."""
    server.quiet()
    backend = remote_backend(endpoint("openai", server.base_url))
    chat = ChatRequest(messages=(ChatMessage("user", "add two numbers"),), max_tokens=32)
    first, second = Usage(), Usage()

    async def twice() -> None:
        try:
            await collect(backend.chat(chat, first, permit=permit_for(backend)))
            await collect(backend.chat(chat, second, permit=permit_for(backend)))
        finally:
            await backend.aclose()

    run_on_fastest_loop(twice())
    assert first.setup_ms > 0
    assert second.setup_ms == 0

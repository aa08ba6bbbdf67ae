"""`gateway-ls gateway`: serve the OpenAI-compatible front door until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator

import uvicorn

from lsp_server.backends.factory import local_backend_factory, remote_backend
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from lsp_server.config.loader import ConfigError
from lsp_server.config.model import Config
from lsp_server.config.watcher import ConfigWatcher
from lsp_server.gateway.app import create_app
from lsp_server.loopback import is_loopback
from lsp_server.progress import StderrProgress
from lsp_server.routing.router import Router
from lsp_server.routing.stats_file import StatsFile
from lsp_server.routing.status_file import StatusPublisher
from lsp_server.suggest.service import SuggestionService


def run_gateway(config: Config, *, host: str, port: int) -> int:
    """Serve until interrupted; exit code 2 when the bind rule refuses to start."""
    token_env = config.gateway.token_env
    token = (os.environ.get(token_env) or None) if token_env else None
    if not is_loopback(host) and token is None:
        print(_token_required_message(config, host), file=sys.stderr)
        return EXIT_USAGE
    try:
        asyncio.run(_serve(config, host, port, token))
    except SystemExit as exit_:  # uvicorn exits when it cannot bind
        return exit_.code if isinstance(exit_.code, int) else EXIT_FAILURE
    return EXIT_OK


def _token_required_message(config: Config, host: str) -> str:
    where = str(config.source) if config.source else "the configuration"
    if not config.gateway.token_env:
        fix = f"set [gateway] token_env in {where} to the name of a variable holding a token"
    else:
        variable = config.gateway.token_env
        fix = f"the variable {variable} named by [gateway] token_env is unset or empty"
    return (
        f"gateway-ls gateway: refusing to listen on {host} without a token: {fix} "
        "(clients then send it as `Authorization: Bearer <token>`), or bind to 127.0.0.1"
    )


async def _serve(config: Config, host: str, port: int, token: str | None) -> None:
    router = Router(
        config,
        remote_factory=remote_backend,
        local_factory=local_backend_factory(StderrProgress()),
        stats_file=StatsFile(),
    )
    suggestions = SuggestionService(router)
    watcher = ConfigWatcher(config.source, router.reconfigure, _report_config_error)
    publisher = StatusPublisher(router.status, kind="gateway")
    server = _Server(
        uvicorn.Config(
            create_app(router, suggestions, token=token),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
        )
    )
    shown_host = f"[{host}]" if ":" in host else host
    print(f"gateway-ls gateway: OpenAI base URL http://{shown_host}:{port}/v1", file=sys.stderr)
    try:
        await watcher.start()
        publisher.start()
        await server.serve()
    finally:
        await watcher.stop()
        await publisher.stop()
        await router.aclose()


def _report_config_error(error: ConfigError) -> None:
    print(
        f"gateway-ls: invalid configuration, the last good one stays in force: {error}",
        file=sys.stderr,
    )


class _Server(uvicorn.Server):
    """Stops on SIGINT/SIGTERM like uvicorn, without re-raising the signal afterwards, so the
    router is closed and the command returns its exit code."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

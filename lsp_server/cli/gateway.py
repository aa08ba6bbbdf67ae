"""`gateway-ls gateway`: serve the OpenAI-compatible front door until interrupted."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

import uvicorn

from lsp_server.cli.collection import frozen_for_serving
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from lsp_server.config.loader import ConfigError
from lsp_server.config.model import Config
from lsp_server.config.watcher import ConfigWatcher
from lsp_server.core.engine import Engine
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.gateway.app import create_app
from lsp_server.gateway.client_tokens import ClientTokens, load_client_tokens
from lsp_server.gateway.metrics import GatewayMetrics
from lsp_server.gateway.open_files import connection_limit
from lsp_server.gateway.slow_clients import BodyDeadline, head_timeout_protocol
from lsp_server.loopback import is_loopback
from lsp_server.progress import StderrProgress
from lsp_server.routing.redis_link import RedisLink
from lsp_server.routing.status_file import StatusPublisher

# The longest start-up waits for the endpoints' first connections and the shared state's first
# answer before it takes traffic; what is unreachable then is met by the requests.
WARM_UP_S = 2.0


def run_gateway(config: Config, *, host: str, port: int) -> int:
    """Serve until interrupted; exit code 2 when the bind rule refuses to start (and
    `ConfigError` for a token file or state password that is not usable)."""
    clients = load_client_tokens(config.gateway, source=config.source)
    if not is_loopback(host) and not clients:
        print(_token_required_message(config, host), file=sys.stderr)
        return EXIT_USAGE
    state_password = _state_password(config)
    try:
        run_on_fastest_loop(_serve(config, host, port, clients, state_password))
    except SystemExit as exit_:  # uvicorn exits when it cannot bind
        return exit_.code if isinstance(exit_.code, int) else EXIT_FAILURE
    return EXIT_OK


def _token_required_message(config: Config, host: str) -> str:
    where = str(config.source) if config.source else "the configuration"
    if not config.gateway.token_env:
        fix = (
            f"set [gateway] token_env in {where} to the name of a variable holding a token "
            "(or token_file to a file of `client-name token` lines)"
        )
    else:
        variables = ", ".join(config.gateway.token_env)
        fix = f"the variables named by [gateway] token_env are unset or empty: {variables}"
    return (
        f"gateway-ls gateway: refusing to listen on {host} without a token: {fix} "
        "(clients then send it as `Authorization: Bearer <token>`), or bind to 127.0.0.1"
    )


def _warn_unknown_clients(config: Config, clients: ClientTokens) -> None:
    """A `[gateway.clients.NAME]` table that names no client is most likely a typo."""
    unknown = sorted(set(config.gateway.clients) - set(clients.names))
    if unknown and clients:
        print(
            "gateway-ls gateway: [gateway.clients] names no client with a token: "
            + ", ".join(unknown),
            file=sys.stderr,
        )


def _state_password(config: Config) -> str | None:
    variable = config.gateway.state_password_env
    if not variable or not config.gateway.state_url:
        return None
    password = os.environ.get(variable)
    if not password:
        raise ConfigError(
            f"the variable {variable} named by state_password_env is unset or empty",
            file=str(config.source) if config.source else None,
            key="gateway.state_password_env",
        )
    return password


async def _serve(
    config: Config,
    host: str,
    port: int,
    clients: ClientTokens,
    state_password: str | None,
) -> None:
    engine = Engine.for_process(config, on_model_progress=StderrProgress())
    metrics = GatewayMetrics(engine.router.endpoint_health, engine.router.suggestion_counts)
    link = None
    if config.gateway.state_url:
        link = RedisLink(config.gateway.state_url, state_password, engine.router.share_state())
        engine.limits.share(config.gateway.state_url, state_password, metrics.observe_redis)
    _warn_unknown_clients(config, clients)
    watcher = ConfigWatcher(config.source, engine.reconfigure, _report_config_error, loaded=config)
    publisher = StatusPublisher(engine.router.status, kind="gateway")
    limits = config.gateway
    server = _Server(
        uvicorn.Config(
            BodyDeadline(
                create_app(engine, clients=clients, metrics=metrics),
                timeout_s=limits.body_timeout_ms / 1000,
            ),
            host=host,
            port=port,
            http=head_timeout_protocol(
                limits.header_timeout_ms / 1000, max_half_open_per_ip=limits.max_half_open_per_ip
            ),
            limit_concurrency=connection_limit(limits.max_connections),
            timeout_keep_alive=5,
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
        if link is not None:
            link.start()
        await engine.warm_up(WARM_UP_S)
        server.config.load()  # uvicorn's protocol classes, before the heap is frozen
        frozen_for_serving()
        await server.serve()
    finally:
        if link is not None:
            await link.stop()
        await watcher.stop()
        await publisher.stop()
        await engine.aclose()


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

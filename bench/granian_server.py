"""The two apps the gateway benchmarks compare, gateway-ls's gateway and the floor proxy, served
by granian (a Rust HTTP server that runs ASGI apps) instead of uvicorn, so that the two servers
are measured against each other in the same runs.

Granian runs embedded: its Rust HTTP/1 server hands each request to the app on this process's
own event loop (uvloop, as under uvicorn), where the gateway's engine lives; one process, as
`gateway-ls gateway` is. The gateway is built as that command builds it
(`lsp_server/cli/gateway.py`): the engine, the app behind its body deadline, warmed up, the heap
frozen; granian's header timeout and request cap stand in for uvicorn's head timeout and
connection cap. Loopback and no shared state, as in the benchmarks; the configuration watcher
and the status file (a wake-up a second each, nothing per request) are left out.

Run as `python -m bench.granian_server gateway PORT CONFIG` or
`python -m bench.granian_server floor PORT UPSTREAM_BASE_URL`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels
from granian.server.embed import Server
from starlette.types import ASGIApp

from bench.floor_proxy import floor_app
from lsp_server.cli.collection import frozen_for_serving
from lsp_server.cli.gateway import WARM_UP_S
from lsp_server.config.loader import load_config_file
from lsp_server.core.engine import Engine
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.gateway.app import create_app
from lsp_server.gateway.client_tokens import load_client_tokens
from lsp_server.gateway.metrics import GatewayMetrics
from lsp_server.gateway.open_files import connection_limit
from lsp_server.gateway.slow_clients import BodyDeadline
from lsp_server.progress import StderrProgress


async def serve_on_granian(
    app: ASGIApp,
    port: int,
    *,
    http1: HTTP1Settings | None = None,
    max_requests: int | None = None,
) -> None:
    """Serve `app` on 127.0.0.1:`port` until SIGINT or SIGTERM; `max_requests`: the requests
    granian lets in at once (its backpressure)."""
    server = Server(
        app,
        address="127.0.0.1",
        port=port,
        interface=Interfaces.ASGINL,  # no lifespan, as uvicorn's lifespan="off"
        http=HTTPModes.http1,
        http1_settings=http1,
        websockets=False,
        backpressure=max_requests,
        log_level=LogLevels.warning,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.stop)
    await server.serve()


async def serve_gateway(config_path: Path, port: int) -> None:
    config = load_config_file(config_path)
    clients = load_client_tokens(config.gateway, source=config.source)
    engine = Engine.for_process(config, on_model_progress=StderrProgress())
    metrics = GatewayMetrics(engine.router.endpoint_health, engine.router.suggestion_counts)
    limits = config.gateway
    app = BodyDeadline(
        create_app(engine, clients=clients, metrics=metrics),
        timeout_s=limits.body_timeout_ms / 1000,
    )
    try:
        await engine.warm_up(WARM_UP_S)
        frozen_for_serving()
        await serve_on_granian(
            app,
            port,
            http1=HTTP1Settings(header_read_timeout=limits.header_timeout_ms),
            max_requests=connection_limit(limits.max_connections),
        )
    finally:
        await engine.aclose()


async def serve_floor(upstream_base_url: str, port: int) -> None:
    await serve_on_granian(floor_app(upstream_base_url, "fake-model"), port)


def main() -> int:
    which, port, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if which == "gateway":
        run_on_fastest_loop(serve_gateway(Path(target), port))
    elif which == "floor":
        run_on_fastest_loop(serve_floor(target, port))
    else:
        print(f"expected gateway or floor, got {which!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""gateway-ls's ASGI app and the floor proxy's, for granian (`bench_gateway --granian`).

granian (a Rust HTTP server that runs ASGI apps) imports its app in a worker process of its own,
through a factory named on its command line (`granian --interface asgi --factory
bench.granian_apps:gateway`); the configuration's path (`GATEWAY_LS_BENCH_CONFIG`) or the
upstream's URL (`GATEWAY_LS_BENCH_UPSTREAM`) comes in the environment. The gateway's app is the
one `gateway-ls gateway` serves, with its body deadline; what `gateway-ls gateway` gives uvicorn
beside the app (its head timeout and the bound on half-open connections per address, its
concurrency limit, the start's warm-up) has no counterpart here.
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.types import ASGIApp

from bench.floor_proxy import floor_app
from lsp_server.config.loader import load_config_file
from lsp_server.core.engine import Engine
from lsp_server.gateway.app import create_app
from lsp_server.gateway.slow_clients import BodyDeadline


def gateway() -> ASGIApp:
    config = load_config_file(Path(os.environ["GATEWAY_LS_BENCH_CONFIG"]))
    app = create_app(Engine.for_process(config), clients=None)
    return BodyDeadline(app, timeout_s=config.gateway.body_timeout_ms / 1000)


def floor() -> ASGIApp:
    return floor_app(os.environ["GATEWAY_LS_BENCH_UPSTREAM"], "fake-model")

"""The least an OpenAI-compatible gateway in Python does for a completion: the floor that
`bench_gateway` measures gateway-ls against.

One Starlette route on uvicorn (on uvloop, as the gateway runs) that sends the client's body on
to the endpoint with an httpx `AsyncClient` and returns the endpoint's answer as it came: no
routing, privacy, streaming, cleaning or accounting. For `bench_agent_turn`, chat completions
and Responses requests are relayed as bytes, the answer streamed back as it arrives. What it
adds over the direct request is what the HTTP server, the framework and the HTTP client cost in
this interpreter; what gateway-ls adds over it is its own.

`--team` (for `bench_team`, hundreds of streams at once): the upstream client gateway-ls makes
for an endpoint (`http_client.make_client`: its transport and pool sizes), since httpx's stock
pool walks every connection whenever a request joins or leaves it; a streamed completion
relayed as bytes too.

Run as `python -m bench.floor_proxy PORT UPSTREAM_BASE_URL [--team]`.
"""

from __future__ import annotations

import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from lsp_server import json_codec
from lsp_server.backends.http_client import make_client
from lsp_server.event_loop import run_on_fastest_loop


def floor_app(upstream_base_url: str, model: str, team: bool = False) -> Starlette:
    base_url = upstream_base_url.rstrip("/") + "/"
    client = make_client(base_url, 30) if team else httpx.AsyncClient(base_url=base_url, timeout=30)

    async def completions(request: Request) -> Response:
        body = await request.json()
        if body.get("stream"):
            return await relay(request, json_codec.dumps({**body, "model": model}))
        answer = await client.post("completions", json={**body, "model": model})
        return Response(answer.content, answer.status_code, media_type="application/json")

    async def relay(request: Request, content: bytes | None = None) -> Response:
        path = request.url.path.removeprefix("/v1/")
        headers = {"Content-Type": "application/json"}
        if content is None:
            content = await request.body()
        sent = client.build_request("POST", path, content=content, headers=headers)
        answer = await client.send(sent, stream=True)
        return StreamingResponse(
            answer.aiter_raw(),
            answer.status_code,
            media_type=answer.headers.get("content-type"),
            background=BackgroundTask(answer.aclose),
        )

    async def healthz(request: Request) -> Response:
        return Response("ok")

    routes = [
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", relay, methods=["POST"]),
        Route("/v1/responses", relay, methods=["POST"]),
        Route("/healthz", healthz),
    ]
    return Starlette(routes=routes)


def main() -> int:
    port, upstream = int(sys.argv[1]), sys.argv[2]
    config = uvicorn.Config(
        floor_app(upstream, "fake-model", team="--team" in sys.argv[3:]),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    run_on_fastest_loop(uvicorn.Server(config).serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())

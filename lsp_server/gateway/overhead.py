"""`X-Gateway-LS-Overhead-Ms`: the time the gateway itself added to an answer.

As LiteLLM's `x-litellm-overhead-duration-ms` counts it: the request's whole time in the
gateway less the upstream's. That is the time before the upstream was asked (reading, privacy,
admission, routing) plus the time between the upstream's last byte and the client's end
(cleaning, writing, settling). The clock starts when the request reaches the gateway's app;
what the HTTP server did before is not seen, as it is not by LiteLLM. The upstream's time is the
core's routed call, from its start to the answer's last event (`latency_ms`), or from the first
ask to the answer's end where the route reports no such time: the HTTP client's own work on the
upstream's bytes is in it, as it is in LiteLLM's call time.

A header goes before the body, so it can only hold what is known by then:

- an answer whose upstream ended before its headers went (every answer not streamed, every
  error, a request nothing upstream was asked for) carries the whole figure;
- a streamed answer carries the time before the upstream was asked, the one part known when its
  first piece is written, as LiteLLM's header on a stream holds what it measured before the
  stream began. `/metrics` observes the whole figure once the stream ends
  (`gateway_ls_overhead_seconds`).

Not a trailer: HTTP/1.1 trailers reach only a client that sent `TE: trailers` over a chunked
body, which OpenAI's SDKs and browsers' `fetch` do not, and uvicorn writes none.
"""

from __future__ import annotations

import time

OVERHEAD_HEADER = "x-gateway-ls-overhead-ms"
CLOCK_KEY = "gateway_ls_clock"  # in the ASGI scope's state: the request's `GatewayClock`


class GatewayClock:
    """When a request reached the gateway, when its upstream was first asked, and how long the
    upstream's answer took once it has ended."""

    __slots__ = ("arrived", "asked", "upstream_s")

    def __init__(self) -> None:
        self.arrived = time.perf_counter()
        self.asked: float | None = None
        self.upstream_s: float | None = None

    def asking(self) -> None:
        """An upstream is being asked (the first time counts)."""
        if self.asked is None:
            self.asked = time.perf_counter()

    def upstream_ended(self, upstream_s: float | None = None) -> None:
        """The upstream's answer ended now, having taken `upstream_s` (None: since it was
        asked; nothing was asked: no upstream time)."""
        if upstream_s is None:
            asked = self.asked
            upstream_s = 0.0 if asked is None else time.perf_counter() - asked
        self.upstream_s = upstream_s

    def added_s(self) -> float:
        """The gateway's own time so far: whole once the upstream ended; while it has not
        (a stream's headers, a client gone mid-answer), the time before it was asked."""
        now = time.perf_counter()
        if self.upstream_s is not None:
            return max(0.0, now - self.arrived - self.upstream_s)
        if self.asked is not None:
            return self.asked - self.arrived
        return now - self.arrived


def header_value(seconds: float) -> bytes:
    return b"%.2f" % (seconds * 1000)

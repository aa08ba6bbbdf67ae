"""httpcore's connection pool with bookkeeping that stays cheap when hundreds of connections
are open to one endpoint, as a team's gateway holds them to its upstream.

httpcore 1.0 sorts out its connections whenever a request joins or leaves the pool, and does it
in a way that grows with the square of the connections open: it asks every connection whether
it has expired (for an idle one, a poll of its socket), and for each idle one counts all the
connections again. That count is the length of a list of every connection, not of the idle
ones, so once more connections are open than may be kept alive, every connection that falls
idle is closed: under load nothing is reused and each request opens a new one. A gateway
streaming 200 agent turns to one upstream spent a fifth of its CPU in this.

Here the same decisions take one pass: closed connections are dropped, idle ones beyond the
keep-alive limit (counted as idle ones) are closed, oldest first, and a queued request takes
the first connection that can serve it, else a new one, else the place of an idle one. Whether
an idle connection has expired (its keep-alive time is up, or the server closed it) is asked
when it is about to be reused, and of all idle ones at most once a second.
"""

from __future__ import annotations

import time

import httpcore
from httpcore import AsyncConnectionInterface

SWEEP_EVERY_S = 1.0  # how often every idle connection is asked whether it has expired


class LinearConnectionPool(httpcore.AsyncConnectionPool):
    _next_sweep = 0.0

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        now = time.monotonic()
        sweep = now >= self._next_sweep
        if sweep:
            self._next_sweep = now + SWEEP_EVERY_S
        kept: list[AsyncConnectionInterface] = []
        idle: list[AsyncConnectionInterface] = []
        for connection in self._connections:
            if connection.is_closed():
                continue
            if connection.is_idle():
                if sweep and connection.has_expired():
                    closing.append(connection)
                    continue
                idle.append(connection)
            elif connection.has_expired():  # cheap: a busy connection's own clock
                closing.append(connection)
                continue
            kept.append(connection)
        surplus = len(idle) - self._max_keepalive_connections
        if surplus > 0:
            closed = set(idle[:surplus])
            closing.extend(idle[:surplus])
            idle = idle[surplus:]
            kept = [connection for connection in kept if connection not in closed]
        self._connections = kept

        for pool_request in self._requests:
            if not pool_request.is_queued():
                continue
            origin = pool_request.request.url.origin
            reused = self._reusable(origin, closing)
            if reused is not None:
                if reused in idle:
                    idle.remove(reused)  # taken: not to be replaced by the next request
                pool_request.assign_to_connection(reused)
                continue
            if len(self._connections) >= self._max_connections:
                replaced = next((c for c in idle if c in self._connections), None)
                if replaced is None:
                    continue  # it waits for a connection to come free
                idle.remove(replaced)
                self._connections.remove(replaced)
                closing.append(replaced)
            connection = self.create_connection(origin)
            self._connections.append(connection)
            pool_request.assign_to_connection(connection)
        return closing

    def _reusable(
        self, origin: httpcore.Origin, closing: list[AsyncConnectionInterface]
    ) -> AsyncConnectionInterface | None:
        """The first connection that can serve `origin` now; an idle one that turns out to
        have expired is closed on the way."""
        for connection in list(self._connections):
            if not (connection.can_handle_request(origin) and connection.is_available()):
                continue
            if connection.is_idle() and connection.has_expired():
                self._connections.remove(connection)
                closing.append(connection)
                continue
            return connection
        return None

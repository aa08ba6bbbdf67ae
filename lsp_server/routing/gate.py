"""The one door out: every call that would leave the machine passes here, on every route.

Routing rule 1 (`docs/architecture.md`, "Privacy"): the routes only gather facts about a
request (is what it is about sensitive, or does it hold a secret: `held`); the gate alone
decides, with the offline mode in force at the moment of the call. It decides twice:

- `verdict`, when a route chooses who may answer: why the request must stay on this machine,
  or None;
- `permit`, for each call of an endpoint (a race's primary, hedge or probe, a chat's next
  endpoint, a pass-through, a warm-up connection, `doctor`'s one-token call): the `Permit`
  that the backend's signature requires, or `StaysHome`.

The mode is read at every call, not once per request: when `offline = "always"` is set (in
the file or by `gatewayLs.setOffline`) while a request is under way, its later hedges and
retries are refused, and only the local model goes on answering.

Calls that carry no user content (a warm-up connection, a probe of a remote that seemed down,
a model list) have no facts: under `offline = "always"` they are refused too, since nothing
leaves the machine then, not even a probe.
"""

from __future__ import annotations

from collections.abc import Callable

from lsp_server.config.model import OfflineMode
from lsp_server.permit import GATE_ONLY, Permit
from lsp_server.reasons import Reason


class StaysHome(Exception):
    """The gate's refusal: this call may not leave the machine; `reason` says why."""

    def __init__(self, endpoint: str, reason: Reason) -> None:
        super().__init__(f"{endpoint}: not called, the request stays on this machine ({reason})")
        self.endpoint = endpoint
        self.reason = reason


class Gate:
    """Decides, for the offline mode in force, what may leave the machine."""

    def __init__(self, mode: Callable[[], OfflineMode]) -> None:
        self._mode = mode

    @property
    def closed(self) -> bool:
        """Nothing leaves the machine: `offline = "always"`."""
        return self._mode() == "always"

    def verdict(self, held: Reason | None) -> Reason | None:
        """Why a request must stay on this machine, or None: the offline mode first, then what
        the route found in the parts that must be sent whole (`held`: a sensitive document or
        a secret)."""
        if self.closed:
            return Reason.OFFLINE
        return held

    def permit(self, endpoint: str, *, remote: bool, held: Reason | None) -> Permit:
        """Leave to call `endpoint` for a request of these facts; raises `StaysHome` for a
        remote endpoint the request may not reach. The local model is always permitted."""
        if remote:
            reason = self.verdict(held)
            if reason is not None:
                raise StaysHome(endpoint, reason)
        return Permit(endpoint, remote=remote, issuer=GATE_ONLY)

    def contentless(self, endpoint: str) -> Permit:
        """Leave for a call with no user content (warm-up, probe, model list) to a remote
        endpoint; raises `StaysHome` when nothing may leave the machine."""
        return self.permit(endpoint, remote=True, held=None)

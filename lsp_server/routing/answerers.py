"""Who can answer a request: the one place that decides between the remotes and the local model.

Routing rules 1, 3 and 4 of `docs/architecture.md`: a request that must stay on this machine
(the gate's verdict, `routing/gate.py`, or inline while offline is detected) has the local
model alone; otherwise the remote endpoints
of its role serve it, chat falling back to the inline endpoints when no `refactor` endpoint is
configured, and the local model after them. The router ranks what this returns; the front doors
ask it why nothing can serve a request before trying (a 503 at the gateway, the model loaded
first by `gateway-ls complete`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.backends.local_model import LocalState
from lsp_server.config.model import Role
from lsp_server.failures import RefusalCode, Refused
from lsp_server.reasons import Reason
from lsp_server.routing.endpoint_pool import Endpoint, EndpointPool

NO_NEXT_EDITS = (
    "the local model's preset does not predict next edits (choose one that does, "
    'such as [local] model = "qwen2.5-coder-0.5b")'
)


@dataclass(frozen=True, slots=True)
class Answerers:
    """The endpoints that may serve one request, before ranking."""

    remotes: tuple[Endpoint, ...]
    local: Endpoint | None
    local_state: LocalState | None  # None: the local model is disabled
    local_error: str | None  # why it failed to load, when it did
    # Why only the local model may answer (the request is sensitive, or inline while offline).
    stay_local: Reason | None
    # The remotes are the inline endpoints standing in for absent `refactor` ones.
    inline_fallback: bool = False
    # Why the local model is not asked for this role although it is on (its preset does not
    # predict next edits); None: it may be asked.
    local_declines: str | None = None

    @property
    def local_must_answer(self) -> bool:
        """Nothing but the local model can answer: load it first, prefill it, wait for it."""
        return self.stay_local is not None or not self.remotes

    def unavailable(self, role: Role) -> Refused | None:
        """Why nothing could serve this request without trying, or None if something may."""
        if self.stay_local is Reason.OFFLINE:
            why = "this machine is offline"
        elif self.stay_local is not None:
            why = "this request must stay on this machine"
        elif self.remotes:
            return None
        else:
            why = f"no endpoint has the role {role!r}"
        if self.local_state is None or self.local_state is LocalState.DISABLED:
            return Refused(
                RefusalCode.NO_ENDPOINT_AVAILABLE,
                f"{why} and the local model is disabled ([local] enabled = false)",
            )
        if self.local_state is LocalState.FAILED:
            return Refused(
                RefusalCode.NO_ENDPOINT_AVAILABLE,
                f"{why} and the local model failed to load: {self.local_error or 'unknown error'}",
            )
        if self.local_declines is not None:
            return Refused(RefusalCode.NO_ENDPOINT_AVAILABLE, f"{why} and {self.local_declines}")
        if role in ("inline", "edit") and self.local_state is not LocalState.READY:
            return Refused(
                RefusalCode.LOCAL_MODEL_LOADING,
                f"{why} and the local model is still loading; retry shortly",
            )
        return None


def who_answers(
    pool: EndpointPool, role: Role, *, stay_local: Reason | None, offline: bool
) -> Answerers:
    """The endpoints that may serve a request of `role`.

    `stay_local` is the gate's verdict (None: the request may leave the machine); `offline`
    is whether inline traffic is held on this machine now, offline being detected.
    """
    model = pool.local_model
    state = model.state if model is not None else None
    error = model.load_error if model is not None else None
    if stay_local is None and offline and role in ("inline", "edit"):
        stay_local = Reason.OFFLINE
    declines = None
    if role == "edit" and model is not None and model.next_edit_supported is False:
        declines = NO_NEXT_EDITS
    if stay_local is not None:
        return Answerers((), pool.local, state, error, stay_local, local_declines=declines)
    remotes = tuple(e for e in pool.remotes.values() if role in e.roles)
    inline_fallback = False
    if not remotes and role == "refactor":
        remotes = tuple(e for e in pool.remotes.values() if "inline" in e.roles)
        inline_fallback = bool(remotes)
    return Answerers(remotes, pool.local, state, error, None, inline_fallback, declines)

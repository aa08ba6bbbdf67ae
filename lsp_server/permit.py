"""Leave to call one endpoint for one request: what every backend call requires.

Every method of a backend that makes a call (`complete`, `chat`, `chat_events`, `edit`,
`connect`, and the Responses pass-through's `events`) takes a `Permit`, and only the gate
(`routing/gate.py`) issues one: so a route that forgets to ask the gate does not type-check,
and `tests/test_layers.py` holds that nothing else constructs one. A remote backend checks
that the permit names it and lets it leave the machine (`check_remote`).
"""

from __future__ import annotations

from typing import Final, final

# Handed to the constructor by the gate alone; any other caller is refused at run time.
GATE_ONLY: Final = object()


class PermitError(RuntimeError):
    """A backend was called with a permit that does not let it make this call (a bug)."""


@final
class Permit:
    """The gate's leave to call `endpoint`; `remote` says it may leave the machine."""

    __slots__ = ("endpoint", "remote")

    def __init__(self, endpoint: str, *, remote: bool, issuer: object) -> None:
        if issuer is not GATE_ONLY:
            raise PermitError("a permit is issued by the gate alone (routing/gate.py)")
        self.endpoint = endpoint
        self.remote = remote

    def check_remote(self, endpoint: str) -> None:
        """Raise unless this permit lets `endpoint`, a remote one, be called."""
        if not self.remote or self.endpoint != endpoint:
            raise PermitError(f"{endpoint}: called with a permit for {self.endpoint!r}")

    def __repr__(self) -> str:
        return f"Permit({self.endpoint!r}, remote={self.remote})"

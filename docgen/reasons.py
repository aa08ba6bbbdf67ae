"""The reasons a routing decision gives, from `lsp_server/reasons.py`."""

from __future__ import annotations

from docgen.markdown import GENERATED, code, table
from lsp_server.reasons import Reason


def reasons_page() -> str:
    rows = [(code(reason.value), reason.meaning) for reason in Reason]
    return "".join(
        [
            "# Routing reasons\n\n",
            GENERATED,
            "\nEvery decision the router records carries one of these: in `gatewayLs.status`, "
            "on stderr from `gateway-ls complete`, in `gateway-ls stats` and in the gateway's "
            "`X-Gateway-LS-Reason` header. See [Routing](../routing.md).\n\n",
            table(("reason", "meaning"), rows),
        ]
    )

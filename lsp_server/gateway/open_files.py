"""Room for the gateway's connections in the process's limit on open files.

Each connection is a file descriptor. Many systems start processes with a soft limit of 1,024
open files, below what `max_connections` allows, while the hard limit is far higher; past the
soft limit `accept()` fails and new clients wait. So the soft limit is raised toward the hard
limit, and the connection cap is lowered to what fits when the hard limit is the lower.
"""

from __future__ import annotations

import sys

# Descriptors the gateway needs besides client connections: logs, the configuration watcher,
# connection pools to the endpoints, Redis, the local model's files.
RESERVED_FILES = 128


def connection_limit(wanted: int) -> int:
    """The number of client connections to allow, at most `wanted`, after raising the soft limit
    on open files toward the hard one to fit them."""
    if sys.platform == "win32":
        return wanted  # no RLIMIT_NOFILE; the C runtime's own limit does not apply to sockets
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + RESERVED_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    allowed = max(1, soft - RESERVED_FILES)
    print(
        f"gateway-ls gateway: the open-file limit ({soft}) allows {allowed} connections, "
        f"fewer than max_connections = {wanted}",
        file=sys.stderr,
    )
    return allowed

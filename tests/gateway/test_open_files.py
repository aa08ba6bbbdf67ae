"""The gateway makes room for its connections in the process's limit on open files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from lsp_server.gateway.open_files import RESERVED_FILES

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(sys.platform == "win32", reason="no RLIMIT_NOFILE on Windows"),
]

# Runs in a fresh interpreter, whose limits it may lower without touching the test process.
_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    from lsp_server.gateway.open_files import connection_limit

    soft, hard = (int(limit) for limit in sys.argv[1:3])
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    allowed = connection_limit(int(sys.argv[3]))
    print(json.dumps([allowed, *resource.getrlimit(resource.RLIMIT_NOFILE)]))
    """
)


def probe(soft: int, hard: int, wanted: int) -> tuple[list[int], str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(soft), str(hard), str(wanted)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout), done.stderr


def hard_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def test_the_soft_limit_is_raised_to_hold_every_connection() -> None:
    wanted = 2048
    if hard_limit() < wanted + RESERVED_FILES:
        pytest.skip("the hard limit on open files is below what the test needs")
    (allowed, soft, _), stderr = probe(256, wanted + RESERVED_FILES, wanted)
    assert allowed == wanted
    assert soft == wanted + RESERVED_FILES
    assert stderr == ""


def test_a_lower_hard_limit_lowers_the_connection_cap_and_says_so() -> None:
    if hard_limit() < 512:
        pytest.skip("the hard limit on open files is below what the test needs")
    (allowed, soft, hard), stderr = probe(256, 512, 2048)
    assert (soft, hard) == (512, 512)
    assert allowed == 512 - RESERVED_FILES
    assert "max_connections = 2048" in stderr

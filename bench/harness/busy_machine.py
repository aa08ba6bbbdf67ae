"""A machine doing other work beside the editor, as the main job must be served on one."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def one_core_busy() -> Iterator[None]:
    """A build running beside the editor: one process spinning on a core."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()

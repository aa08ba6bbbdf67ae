"""Real editors the suite drives, installed by `make test`.

Missing, a test that needs one is skipped on a developer's machine, but fails in CI (`CI` set,
as `.ci/run` sets it): there the Makefile must have installed it, and a silent skip would hide
a broken install step.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def tool_missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)

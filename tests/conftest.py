"""Shared fixtures. The real local model is loaded once per session (tests/model_fixtures.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.redis_server import RedisServer
from tests.model_fixtures import bundled_model_path, local_backend
from tests.support.real_tools import require_redis_server, skip_uninstalled

__all__ = ["bundled_model_path", "fake_endpoint", "local_backend", "redis_server"]

# Property tests assert behaviour, not time: on a shared machine one example may wait for a
# core longer than hypothesis's default 200 ms deadline, which then fails a correct test.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--skip-uninstalled",
        action="store_true",
        help="skip, rather than fail, the tests that need redis-server or the bundled model's "
        "package where they are not installed (`make check`)",
    )


def pytest_configure(config: pytest.Config) -> None:
    skip_uninstalled(bool(config.getoption("skip_uninstalled")))


@pytest.fixture(autouse=True, scope="session")
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every process the tests start keeps its state (latency history, status files) in a
    directory of the test session's own, never in the user's."""
    previous = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if previous is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = previous


@pytest.fixture
def fake_endpoint() -> Iterator[FakeLLMServer]:
    """An OpenAI-compatible endpoint on 127.0.0.1, answering at once."""
    with FakeLLMServer(Behaviour(text="return a + b\n"), name="fake") as server:
        yield server


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port, in a temp dir, without persistence."""
    require_redis_server()
    with RedisServer() as server:
        yield server

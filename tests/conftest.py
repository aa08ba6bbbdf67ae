"""Shared fixtures. The real local model is loaded once per session (tests/model_fixtures.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.model_fixtures import bundled_model_path, local_backend
from tests.support.fake_llm_server import Behaviour, FakeLLMServer

__all__ = ["bundled_model_path", "fake_endpoint", "local_backend"]


@pytest.fixture
def fake_endpoint() -> Iterator[FakeLLMServer]:
    """An OpenAI-compatible endpoint on 127.0.0.1, answering at once."""
    with FakeLLMServer(Behaviour(text="return a + b\n"), name="fake") as server:
        yield server

"""Latency estimates kept between runs: the snapshot format, the state file, and a new router
that starts from what an earlier one measured, against real HTTP endpoints on 127.0.0.1."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.backends.base import CompletionRequest
from lsp_server.backends.factory import remote_backend
from lsp_server.config.model import Config, EndpointConfig, LocalConfig, RoutingConfig
from lsp_server.routing.router import Router
from lsp_server.routing.stats_file import MAX_FILE_BYTES, StatsFile
from lsp_server.routing.stats_snapshot import (
    MAX_ENDPOINTS,
    EndpointEstimate,
    StatsSnapshot,
    combine,
    endpoint_key,
    merge,
)
from tests.support.lsp_session import endpoint_toml, server_env
from tests.support.stand_in import no_local_model

REQUEST = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n")
TEXT = "return a + b\n"


def estimate(ms: float, weight: float = 10.0, updated_at: float | None = None) -> EndpointEstimate:
    return EndpointEstimate(math.log(ms), 0.04, weight, 0.5, updated_at or time.time())


def config_for(*servers: tuple[str, FakeLLMServer], model: str = "fake-model") -> Config:
    endpoints = tuple(
        EndpointConfig(name=name, kind="openai", base_url=server.base_url, model=model)
        for name, server in servers
    )
    routing = RoutingConfig(inline_deadline_ms=5000, hedge_after_ms=4000, offline="never")
    return Config(routing=routing, local=LocalConfig(enabled=False), endpoints=endpoints)


def router_with(config: Config, stats_file: StatsFile) -> Router:
    return Router(
        config, remote_factory=remote_backend, local_factory=no_local_model, stats_file=stats_file
    )


# --- the snapshot ----------------------------------------------------------------------------


def test_a_snapshot_survives_its_json_and_names_no_url() -> None:
    key = endpoint_key("fast", "https://secret-host.example/v1", "m")
    snapshot = StatsSnapshot({key: estimate(25.0)})
    text = snapshot.to_json()
    assert "secret-host" not in text and "fast" not in text
    back = StatsSnapshot.from_json(text)
    assert back.endpoints[key].log_ttft_mean == pytest.approx(math.log(25.0), abs=1e-6)
    assert endpoint_key("fast", "https://secret-host.example/v1/", "m") == key
    assert endpoint_key("fast", "https://secret-host.example/v1", "other") != key


def test_hostile_snapshots_parse_to_what_is_valid_only() -> None:
    good_key, good = "a" * 32, [3.0, 0.1, 5.0, None, time.time() - 10]
    cases = [
        "",
        "not json",
        "[" * 100_000,
        json.dumps({"version": 99, "endpoints": {good_key: good}}),
        json.dumps({"version": 1, "endpoints": []}),
        json.dumps({"version": 1, "endpoints": {"../../etc": good}}),
        json.dumps({"version": 1, "endpoints": {good_key: [1e308, 0.1, 5.0, None, 0.0]}}),
        json.dumps({"version": 1, "endpoints": {good_key: [3.0, -1.0, 5.0, None, 0.0]}}),
        json.dumps({"version": 1, "endpoints": {good_key: [3.0, 0.1, 5.0, "x", 0.0]}}),
        json.dumps({"version": 1, "endpoints": {good_key: [3.0, 0.1, True, None, 0.0]}}),
        json.dumps({"version": 1, "endpoints": {good_key: [3.0, 0.1, 5.0, None, 1e12]}}),
    ]
    for text in cases:
        assert StatsSnapshot.from_json(text).endpoints == {}, text[:60]
    mixed = {"version": 1, "endpoints": {good_key: good, "b" * 32: ["bad"]}}
    assert list(StatsSnapshot.from_json(json.dumps(mixed)).endpoints) == [good_key]


def test_a_snapshot_keeps_the_most_recent_endpoints_up_to_its_bound() -> None:
    now = time.time()
    many = {f"{i:032x}": estimate(30.0, updated_at=now - i) for i in range(MAX_ENDPOINTS + 20)}
    kept = StatsSnapshot.from_json(StatsSnapshot(many).to_json()).endpoints
    assert len(kept) == MAX_ENDPOINTS
    assert f"{0:032x}" in kept and f"{MAX_ENDPOINTS + 19:032x}" not in kept


def test_merge_pools_two_estimates_of_one_endpoint_by_weight() -> None:
    key = "c" * 32
    ours = StatsSnapshot({key: estimate(20.0, weight=30.0)})
    theirs = StatsSnapshot({key: estimate(80.0, weight=10.0), "d" * 32: estimate(50.0)})
    merged = merge(ours, theirs)
    assert set(merged.endpoints) == {key, "d" * 32}
    pooled = merged.endpoints[key]
    assert pooled.weight == 40.0
    assert pooled.log_ttft_mean == pytest.approx(0.75 * math.log(20) + 0.25 * math.log(80))
    assert pooled.log_ttft_var > 0.04  # the two levels differ: the spread grows
    assert combine(pooled, estimate(20.0, weight=0.0)).log_ttft_mean == pooled.log_ttft_mean


# --- the file ----------------------------------------------------------------------------------


def test_the_file_round_trips_and_keeps_other_processes_endpoints(tmp_path: Path) -> None:
    path = tmp_path / "state" / "latency-stats.json"
    first, second = StatsFile(path), StatsFile(path)
    first.save(StatsSnapshot({"a" * 32: estimate(20.0)}))
    second.save(StatsSnapshot({"b" * 32: estimate(40.0)}))
    loaded = StatsFile(path).load().endpoints
    assert set(loaded) == {"a" * 32, "b" * 32}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_corrupt_huge_or_odd_file_means_starting_without_history(tmp_path: Path) -> None:
    path = tmp_path / "latency-stats.json"
    assert StatsFile(path).load().endpoints == {}  # missing
    path.write_bytes(b"\x00\xff garbage {")
    assert StatsFile(path).load().endpoints == {}
    path.write_text(" " * (MAX_FILE_BYTES + 1))
    assert StatsFile(path).load().endpoints == {}
    path.unlink()
    path.mkdir()
    assert StatsFile(path).load().endpoints == {}  # a directory
    target = tmp_path / "elsewhere.json"
    target.write_text(StatsSnapshot({"a" * 32: estimate(20.0)}).to_json())
    link = tmp_path / "link.json"
    os.symlink(target, link)
    assert StatsFile(link).load().endpoints == {}  # not followed


# --- a new process starts informed -----------------------------------------------------------


async def test_a_new_router_starts_from_the_last_runs_ranking(tmp_path: Path) -> None:
    stats_file = StatsFile(tmp_path / "latency-stats.json")
    with (
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.25), name="slow") as slow,
        FakeLLMServer(Behaviour(text=TEXT, latency_s=0.0), name="fast") as fast,
    ):
        config = config_for(("slow", slow), ("fast", fast))  # config order: slow first
        first = router_with(config, stats_file)
        for _ in range(6):
            await first.inline(REQUEST)
        await first.aclose()
        assert stats_file.path.exists()

        second = router_with(config, stats_file)
        assert second.pool.remotes["fast"].stats.measured  # before any request of its own
        routed = await second.inline(REQUEST)
        assert routed.endpoint == "fast" and routed.reason == "fastest"
        await second.aclose()

        # Another model behind the same name is another endpoint: it starts afresh.
        third = router_with(config_for(("slow", slow), ("fast", fast), model="m2"), stats_file)
        assert not any(e.stats.measured for e in third.pool.remotes.values())
        await third.aclose()


async def test_a_corrupt_file_does_not_stop_routing(tmp_path: Path) -> None:
    path = tmp_path / "latency-stats.json"
    path.write_text('{"version": 1, "endpoints": {"zz": [1, 2')
    with FakeLLMServer(Behaviour(text=TEXT), name="only") as only:
        router = router_with(config_for(("only", only)), StatsFile(path))
        routed = await router.inline(REQUEST)
        assert routed.text == TEXT and routed.reason == "config-order"
        await router.aclose()
    assert StatsSnapshot.from_json(path.read_text()).endpoints  # rewritten, valid


def test_complete_says_unmeasured_first_then_fastest_from_its_own_history(
    tmp_path: Path,
) -> None:
    """`gateway-ls complete` is a new process each time: the second one starts from the file the
    first one wrote, and only then calls its pick the fastest."""
    source = tmp_path / "add.py"
    source.write_text("def add(a, b):\n    \n", encoding="utf-8")
    with FakeLLMServer(Behaviour(text=TEXT), name="only") as only:
        config = tmp_path / "config.toml"
        config.write_text(
            "[local]\nenabled = false\n" + endpoint_toml("only", only.base_url), encoding="utf-8"
        )
        command = [sys.executable, "-m", "lsp_server", "--config", str(config), "complete"]
        command.append(f"{source}:2:5")
        env = server_env(tmp_path)
        runs = [
            subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
            for _ in range(2)
        ]
    assert [run.returncode for run in runs] == [0, 0], runs[0].stderr
    assert "no latency measured yet" in runs[0].stderr and "fastest" not in runs[0].stderr
    assert "(fastest" in runs[1].stderr
    assert (tmp_path / "xdg-state" / "gateway-ls" / "latency-stats.json").is_file()

"""Where `bench_team`'s added latency goes, request by request (`bench_team --trace`).

The scripted model notes for each request when it arrived, when its body was read, when its
last piece went out and whether it came on a new connection (`team_upstream.trace_writer`); each
gateway, run under `bench.probed_gateway`, notes how late its event loop woke and its
collector's passes. Every process reads the same monotonic clock, so a request's time splits
into the way in (the client's start to the model's arrival), the model's own part and the way
out (the last piece sent to the client's end), for the same request straight and through a
gateway. Printed: those parts' p50 and p99 over the requests read, and the slowest requests
one by one with their session's turn, their gateway, their connection, the loop's worst lag and
the collector's passes while they were in flight.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.percentile import percentile

AGENT_SEQ_BASE = 10_000_000  # as `bench_team.agent` numbers its turns
AGENT_SEQ_SPAN = 10_000


@dataclass(frozen=True)
class Arrival:
    new_connection: bool
    arrived: float
    read: float
    sent: float


@dataclass(frozen=True)
class Probe:
    lags: list[tuple[float, float]]  # (when, ms late)
    passes: list[tuple[float, int, float]]  # (when, generation, ms)
    # seq -> (reached the app, first byte of the answer out, last byte out)
    requests: dict[int, list[tuple[float, float, float]]]


def read_upstream(path: Path) -> dict[int, list[Arrival]]:
    arrivals: dict[int, list[Arrival]] = defaultdict(list)
    if not path.exists():
        return arrivals
    for line in path.read_text().splitlines():
        seq, new, arrived, read, sent = line.split()
        arrivals[int(seq)].append(Arrival(new == "1", float(arrived), float(read), float(sent)))
    return arrivals


def read_probe(path: Path) -> Probe:
    lags, passes = [], []
    requests: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    if path.exists():
        for line in path.read_text().splitlines():
            kind, *fields = line.split()
            if kind == "lag":
                lags.append((float(fields[0]), float(fields[1])))
            elif kind == "gc":
                passes.append((float(fields[0]), int(fields[1]), float(fields[2])))
            elif kind == "req":
                entered, first, last = map(float, fields[1:])
                requests[int(fields[0])].append((entered, first, last))
    return Probe(lags, passes, requests)


def at_gateway(sample: Any, probe: Probe) -> tuple[float, float, float] | None:
    for times in probe.requests.get(sample.seq, []):
        if sample.started <= times[0] <= sample.ended:
            return times
    return None


def arrival_of(sample: Any, arrivals: dict[int, list[Arrival]]) -> Arrival | None:
    for arrival in arrivals.get(sample.seq, []):
        if sample.started <= arrival.arrived <= sample.ended:
            return arrival
    return None


def turn_of(sample: Any, agent_turns: int) -> str:
    if sample.kind != "agent":
        return ""
    return str(((sample.seq - AGENT_SEQ_BASE) % AGENT_SEQ_SPAN - 1) % agent_turns)


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    return f"{percentile(values, 0.5):+.1f} / {percentile(values, 0.99):+.1f}"


def report(
    samples: list[Any],
    straight: list[Any],
    arrivals: dict[int, list[Arrival]],
    probes: dict[str, Probe],
    agent_turns: int,
    slowest: int,
) -> None:
    """`samples`: a gateway phase's requests to read (ok, in the window); `straight`: the
    straight phase's; `probes`: each gateway's, by its URL."""
    by_seq = {s.seq: s for s in straight}
    rows = []
    for sample in samples:
        twin = by_seq.get(sample.seq)
        mine, theirs = arrival_of(sample, arrivals), None
        if twin is not None:
            theirs = arrival_of(twin, arrivals)
        if twin is None or mine is None or theirs is None:
            continue
        way_in = (mine.arrived - sample.started) - (theirs.arrived - twin.started)
        body = (mine.read - mine.arrived) - (theirs.read - theirs.arrived)
        model = (mine.sent - mine.read) - (theirs.sent - theirs.read)
        way_out = (sample.ended - mine.sent) - (twin.ended - theirs.sent)
        rows.append((sample.ms - twin.ms, sample, mine, way_in, body, model, way_out))
    if not rows:
        print("  (no request traced)")
        return
    for kind in ("keystroke", "agent"):
        mine_rows = [row for row in rows if row[1].kind == kind]
        if not mine_rows:
            continue
        parts = {
            "added": [row[0] * 1 for row in mine_rows],
            "the way in (to the model's arrival)": [row[3] * 1000 for row in mine_rows],
            "the body's read": [row[4] * 1000 for row in mine_rows],
            "the model's part": [row[5] * 1000 for row in mine_rows],
            "the way out (from the last piece)": [row[6] * 1000 for row in mine_rows],
        }
        legs: dict[str, list[float]] = defaultdict(list)
        for _, sample, mine, *_ in mine_rows:
            times = at_gateway(sample, probes.get(sample.target, Probe([], [], {})))
            if times is None or not times[2]:
                continue
            legs["client to the gateway's app"].append((times[0] - sample.started) * 1000)
            legs["the gateway's app to the model"].append((mine.arrived - times[0]) * 1000)
            legs["the model's last piece to the gateway's last write"].append(
                (times[2] - mine.sent) * 1000
            )
            legs["the gateway's last write to the client's end"].append(
                (sample.ended - times[2]) * 1000
            )
        for _, sample, *_ in mine_rows:
            twin = by_seq[sample.seq]
            theirs = arrival_of(twin, arrivals)
            if theirs is not None:
                legs["straight: client to the model"].append((theirs.arrived - twin.started) * 1000)
                legs["straight: the model's last piece to the client's end"].append(
                    (twin.ended - theirs.sent) * 1000
                )
        new = sum(row[2].new_connection for row in mine_rows)
        print(
            f"\n{kind}s traced: {len(mine_rows)}, {new} on a new connection to the model; "
            "the gateway phase over the straight one, ms, p50 / p99:"
        )
        for name, values in parts.items():
            print(f"  {name}: {quantiles(values)}")
        print("  each leg, ms, p50 / p99 (not over straight):")
        for name, values in legs.items():
            print(f"    {name}: {quantiles(values)}")
    print(
        "\nthe slowest requests (added ms): kind, seq, agent turn, s into the phase, gateway, new "
        "connection to the model, the way in / body / model / way out (ms over straight), the "
        "legs (ms: client to the gateway's app > to the model | the model's last piece to the "
        "gateway's last write > to the client's end), s into the phase it ended, the gateway "
        "loop's worst lag while in flight (ms), collections then (generation: ms)"
    )
    rows.sort(key=lambda row: row[0], reverse=True)
    first = min(s.started for s in samples)
    for added_ms, sample, mine, way_in, body, model, way_out in rows[:slowest]:
        probe = probes.get(sample.target, Probe([], [], {}))
        times = at_gateway(sample, probe)
        legs_text = "-"
        if times is not None and times[2]:
            legs_text = (
                f"{(times[0] - sample.started) * 1000:.1f} > {(mine.arrived - times[0]) * 1000:.1f}"
                f" | {(times[2] - mine.sent) * 1000:.1f} > {(sample.ended - times[2]) * 1000:.1f}"
            )
        lags = [ms for at, ms in probe.lags if sample.started <= at <= sample.ended]
        during = [p for p in probe.passes if sample.started <= p[0] <= sample.ended]
        passes = [f"{gen}:{ms:.1f}" for _, gen, ms in during]
        print(
            f"  {added_ms:+.1f} {sample.kind} {sample.seq} {turn_of(sample, agent_turns)} "
            f"{sample.started - first:.2f} {sample.target.rsplit(':', 1)[-1]} "
            f"{'new' if mine.new_connection else 'reused'} "
            f"{way_in * 1000:+.1f} / {body * 1000:+.1f} / {model * 1000:+.1f} / "
            f"{way_out * 1000:+.1f} legs {legs_text} ended {sample.ended - first:.2f} "
            f"lag {max(lags, default=0):.1f} gc {' '.join(passes) or '-'}"
        )
    for url, probe in probes.items():
        worst = sorted((ms for _, ms in probe.lags), reverse=True)[:5]
        slow = [f"{gen}:{ms:.1f}" for _, gen, ms in probe.passes if gen > 0]
        print(
            f"  {url}: {len(probe.lags)} wake-ups late by more than 1 ms, worst "
            f"{', '.join(f'{ms:.1f}' for ms in worst)}; middle/oldest passes {len(slow)}: "
            f"{' '.join(slow[:12])}"
        )

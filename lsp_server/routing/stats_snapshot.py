"""What one process knows of each endpoint's latency, as plain numbers another process can use.

A snapshot holds, per endpoint identity, the estimate the router ranks on (the mean and variance
of log time-to-first-token, how many samples back it, milliseconds per streamed token) and when
it was last updated. It carries no user content, no names, URLs or keys: an endpoint is known
by a digest of its name, base URL and model, so an endpoint whose URL or model changes starts
afresh. The same snapshot is what the state file keeps between runs and what several gateways
can share: `merge` pools two snapshots made from different samples (another gateway's), and
`overlay` lays a process's own newer estimates over older ones (the file it started from).

Parsing is for untrusted input (a file anyone could have written): anything malformed or out of
range is dropped, one entry at a time, and a snapshot never holds more than `MAX_ENDPOINTS`.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from typing import Any

FORMAT_VERSION = 1
MAX_ENDPOINTS = 64  # a snapshot keeps the most recently updated endpoints up to this many
MAX_WEIGHT = 1000.0
MAX_LOG_MS = math.log(3_600_000.0)  # an hour: anything slower is not a latency
MAX_MS_PER_TOKEN = 60_000.0


def endpoint_key(name: str, base_url: str, model: str) -> str:
    """The identity of an endpoint in a snapshot: a digest, so no URL leaves in the clear."""
    digest = hashlib.sha256(f"{name}\0{base_url.rstrip('/')}\0{model}".encode())
    return digest.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class EndpointEstimate:
    """One endpoint's latency estimate: log-normal time to first token, and per-token time."""

    log_ttft_mean: float  # mean of ln(ms)
    log_ttft_var: float  # variance of ln(ms)
    weight: float  # effective number of samples behind the estimate
    ms_per_token: float | None  # streaming time per token after the first, when measured
    updated_at: float  # Unix time of the newest sample

    def aged(self, now: float, half_life_s: float) -> EndpointEstimate:
        """The same estimate with its weight halved for every `half_life_s` since its update."""
        age = max(0.0, now - self.updated_at)
        factor = 0.5 ** (age / half_life_s) if half_life_s > 0 else 1.0
        return EndpointEstimate(
            self.log_ttft_mean,
            self.log_ttft_var,
            self.weight * factor,
            self.ms_per_token,
            self.updated_at,
        )


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    endpoints: dict[str, EndpointEstimate]

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "endpoints": {
                    key: [
                        round(e.log_ttft_mean, 6),
                        round(e.log_ttft_var, 6),
                        round(e.weight, 3),
                        None if e.ms_per_token is None else round(e.ms_per_token, 4),
                        round(e.updated_at, 3),
                    ]
                    for key, e in _newest(self.endpoints).items()
                },
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> StatsSnapshot:
        """Parse untrusted text; what does not validate is left out (never an exception)."""
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            return cls({})
        if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
            return cls({})
        raw = document.get("endpoints")
        if not isinstance(raw, dict):
            return cls({})
        endpoints: dict[str, EndpointEstimate] = {}
        for key, fields in raw.items():
            estimate = _parse_estimate(fields)
            if estimate is not None and _valid_key(key):
                endpoints[key] = estimate
        return cls(_newest(endpoints))


def merge(ours: StatsSnapshot, theirs: StatsSnapshot) -> StatsSnapshot:
    """Every endpoint of both; one known to both gets the weight-averaged estimate."""
    endpoints = dict(ours.endpoints)
    for key, other in theirs.endpoints.items():
        mine = endpoints.get(key)
        endpoints[key] = other if mine is None else combine(mine, other)
    return StatsSnapshot(_newest(endpoints))


def overlay(base: StatsSnapshot, top: StatsSnapshot) -> StatsSnapshot:
    """`base` with each endpoint `top` knows replaced by `top`'s estimate when it is newer: for
    a process writing back what it measured itself (it may have started from `base`)."""
    endpoints = dict(base.endpoints)
    for key, estimate in top.endpoints.items():
        old = endpoints.get(key)
        if old is None or estimate.updated_at >= old.updated_at:
            endpoints[key] = estimate
    return StatsSnapshot(_newest(endpoints))


def combine(a: EndpointEstimate, b: EndpointEstimate) -> EndpointEstimate:
    """Pool two estimates of one endpoint as if their samples were one set."""
    total = a.weight + b.weight
    if total <= 0:
        return a if a.updated_at >= b.updated_at else b
    wa, wb = a.weight / total, b.weight / total
    mean = wa * a.log_ttft_mean + wb * b.log_ttft_mean
    var = wa * (a.log_ttft_var + (a.log_ttft_mean - mean) ** 2) + wb * (
        b.log_ttft_var + (b.log_ttft_mean - mean) ** 2
    )
    if a.ms_per_token is None or b.ms_per_token is None:
        per_token = a.ms_per_token if b.ms_per_token is None else b.ms_per_token
    else:
        per_token = wa * a.ms_per_token + wb * b.ms_per_token
    return EndpointEstimate(
        mean, var, min(total, MAX_WEIGHT), per_token, max(a.updated_at, b.updated_at)
    )


def _parse_estimate(fields: Any) -> EndpointEstimate | None:
    if not isinstance(fields, list) or len(fields) != 5:
        return None
    mean, var, weight, per_token, updated_at = fields
    numbers = (mean, var, weight, updated_at)
    if not all(_finite(x) for x in numbers):
        return None
    if per_token is not None and not (_finite(per_token) and 0 <= per_token <= MAX_MS_PER_TOKEN):
        return None
    if not (0.0 <= mean <= MAX_LOG_MS and 0.0 <= var <= 25.0 and 0.0 <= weight <= MAX_WEIGHT):
        return None
    if not 0.0 <= updated_at <= time.time() + 86_400:
        return None
    return EndpointEstimate(
        float(mean),
        float(var),
        float(weight),
        None if per_token is None else float(per_token),
        float(updated_at),
    )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _valid_key(key: Any) -> bool:
    return isinstance(key, str) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)


def _newest(endpoints: dict[str, EndpointEstimate]) -> dict[str, EndpointEstimate]:
    if len(endpoints) <= MAX_ENDPOINTS:
        return endpoints
    kept = sorted(endpoints.items(), key=lambda item: item[1].updated_at, reverse=True)
    return dict(kept[:MAX_ENDPOINTS])

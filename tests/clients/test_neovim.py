"""Neovim 0.12's built-in LSP client against the real server: a real editor, driven headless.

Neovim runs `tests/clients/neovim/init.lua` (the set-up a user would write:
`vim.lsp.inline_completion` and `vim.lsp.completion` on), starts `gateway-ls serve` itself, and
is remote-controlled through its RPC socket with pynvim: keys go in as a person types them, and
the ghost text is read back from the extmarks Neovim draws it with. `make test` installs Neovim
0.12 into .tools/ (scripts/install-nvim.sh).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.busy_machine import one_core_busy
from tests.support.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import endpoint_toml, one_endpoint_config, server_env
from tests.support.real_tools import tool_missing

pynvim = pytest.importorskip("pynvim", reason="pynvim is not installed (the dev extra has it)")

pytestmark = pytest.mark.editor

REPO = Path(__file__).resolve().parents[2]
INIT = Path(__file__).with_name("neovim") / "init.lua"
OFFLINE_EXAMPLE = REPO / "examples" / "offline.toml"
STARTUP_S = 60.0  # Python and the server starting on a loaded machine; no latency assertion
MODEL_S = 240.0  # the bundled model loading on a loaded machine
T = TypeVar("T")


def neovim_binary() -> str:
    for candidate in (REPO / ".tools" / "bin" / "nvim", shutil.which("nvim")):
        if candidate is None or not Path(candidate).exists():
            continue
        version = subprocess.run(
            [str(candidate), "--version"], capture_output=True, text=True, timeout=60
        ).stdout
        match = re.match(r"NVIM v0\.(\d+)", version)
        if match and int(match.group(1)) >= 12:
            return str(candidate)
    tool_missing("Neovim 0.12 is not installed: `make nvim` (scripts/install-nvim.sh) installs it")


def wait_for(probe: Callable[[], T], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@contextlib.contextmanager
def neovim(tmp_path: Path, config: Path) -> Iterator[Any]:
    """A headless Neovim with gateway-ls configured as its Python language server."""
    binary = neovim_binary()
    socket = tmp_path / "nvim.sock"
    env = server_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    setup = {
        "cmd": [sys.executable, "-m", "lsp_server", "serve", "--config", str(config)],
        "root": str(tmp_path),
        "env": {"PYTHONPATH": env["PYTHONPATH"]},
    }
    with (tmp_path / "nvim-stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            [
                binary,
                "--headless",
                "-i",
                "NONE",
                "-u",
                str(INIT),
                "--listen",
                str(socket),
                "--cmd",
                f"lua vim.g.gateway_ls = vim.json.decode([==[{json.dumps(setup)}]==])",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            cwd=tmp_path,
        )
    try:
        wait_for(socket.exists, STARTUP_S, "Neovim's socket")
        editor = pynvim.attach("socket", path=str(socket))
        try:
            yield editor
        finally:
            with contextlib.suppress(Exception):
                editor.command("qall!", async_=True)
            editor.close()
    finally:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def lua(editor: Any, code: str, *args: Any) -> Any:
    return editor.exec_lua(code, *args)


def open_attached(editor: Any, path: Path) -> None:
    editor.command(f"edit {path}")
    wait_for(
        lambda: lua(editor, "local c = gateway_test.client() return c ~= nil and c.initialized"),
        STARTUP_S,
        "gateway-ls to attach",
    )


def status(editor: Any) -> dict[str, Any]:
    response = lua(
        editor,
        "return gateway_test.request('workspace/executeCommand', "
        "{command = 'gatewayLs.status', arguments = {}}, 10000)",
    )
    return response.get("result") or {}


def buffer_text(editor: Any) -> str:
    return "\n".join(editor.current.buffer[:])


@pytest.mark.model
def test_ghost_text_from_the_bundled_model_appears_and_is_accepted(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    """The main job: the shipped offline example unchanged (its 1500 ms local budget), the
    bundled model, Neovim's own ghost text, with one core busy. A keystroke whose suggestion
    misses the budget shows nothing, so the word is retyped once, as a person would."""
    config = tmp_path / "offline.toml"
    shipped = OFFLINE_EXAMPLE.read_text()
    assert "deadline_ms = 1500" in shipped
    config.write_text(shipped)
    source = tmp_path / "shapes.py"
    source.write_text("def area_of_square(side):\n    \n")
    with neovim(tmp_path, config) as editor:
        open_attached(editor, source)
        wait_for(
            lambda: status(editor).get("local", {}).get("state") == "ready",
            MODEL_S,
            "the local model to load (it starts at connect)",
        )
        with one_core_busy():
            editor.input("2GA")  # insert mode at the end of the empty body line
            editor.input("return")
            ghost = ""
            for attempt in range(2):
                if attempt:
                    editor.input("<BS>n")  # retype the last letter: a new request
                with contextlib.suppress(AssertionError):
                    ghost = wait_for(
                        lambda: lua(editor, "return gateway_test.ghost_text()"), 8, "ghost text"
                    )
                    break
            assert ghost.strip(), "no ghost text within the shipped budget, twice"
            assert lua(editor, "return vim.lsp.inline_completion.get()") is True
        wait_for(lambda: len(editor.current.buffer[1]) > len("    return"), 10, "the accepted text")
        line = editor.current.buffer[1]
        assert line.startswith("    return") and len(line.strip()) > len("return")
        decision = status(editor)["decisions"][-1]
        assert (decision["endpoint"], decision["reason"]) == ("local", "offline")


def test_a_completion_item_inserts_the_whole_suggestion(tmp_path: Path) -> None:
    suggestion = "tal = a + b\n    return {'sum': total}\n"
    with FakeLLMServer(Behaviour(text=suggestion)) as endpoint:
        config = one_endpoint_config(tmp_path, endpoint.base_url)
        source = tmp_path / "calc.py"
        source.write_text("def add(a, b):\n    \n")
        with neovim(tmp_path, config) as editor:
            open_attached(editor, source)
            editor.command("set completeopt=menuone,noselect")
            editor.input("2GA")
            editor.input("to")
            wait_for(lambda: editor.api.get_mode()["mode"] == "i", 10, "insert mode")
            lua(editor, "vim.lsp.completion.get()")
            wait_for(lambda: editor.funcs.pumvisible() == 1, 15, "the completion menu")
            editor.input("<C-n><C-y>")
            expected = ["def add(a, b):", "    total = a + b", "    return {'sum': total}"]
            wait_for(lambda: editor.current.buffer[:3] == expected, 10, "the whole suggestion")
            assert editor.current.buffer[:3] == expected


def test_code_actions_are_listed_and_a_refactor_applies_its_edit(tmp_path: Path) -> None:
    answer = "```python\nreturn math.pi * r ** 2\n```\n"
    with FakeLLMServer(Behaviour(text=answer)) as endpoint:
        config = tmp_path / "config.toml"
        config.write_text(
            "[local]\nenabled = false\n"
            + endpoint_toml("reasoner", endpoint.base_url, fim=False, roles='["refactor"]')
        )
        source = tmp_path / "circle.py"
        source.write_text(
            "import math\n\n\ndef area(r):\n    squared = r * r\n    return math.pi * squared\n"
        )
        with neovim(tmp_path, config) as editor:
            open_attached(editor, source)
            titles = [a["title"] for a in lua(editor, "return gateway_test.code_actions(4, 6)")]
            assert "Refactor with reasoning model…" in titles
            assert "Refactor: Simplify" in titles
            assert lua(editor, "return gateway_test.run_action(4, 6, 'Refactor: Simplify')")
            expected = ["import math", "", "", "def area(r):", "    return math.pi * r ** 2"]
            wait_for(lambda: editor.current.buffer[:] == expected, 30, "the refactor's edit")


def test_a_refactor_on_a_line_of_non_ascii_text_lands_in_the_right_place(
    tmp_path: Path,
) -> None:
    """Neovim asks for UTF-8 positions first: the edit after "é" (two bytes, one UTF-16 unit)
    and "✓" (three bytes, one unit) must count bytes, or it lands three characters early."""
    answer = '```python\ntext = "héllo ✓"; count = 2\n```\n'
    with FakeLLMServer(Behaviour(text=answer)) as endpoint:
        config = tmp_path / "config.toml"
        config.write_text(
            "[local]\nenabled = false\n"
            + endpoint_toml("reasoner", endpoint.base_url, fim=False, roles='["refactor"]')
        )
        source = tmp_path / "label.py"
        source.write_text('def label():\n    text = "héllo ✓"; count = 1\n    return text, count\n')
        with neovim(tmp_path, config) as editor:
            open_attached(editor, source)
            encoding = lua(editor, "return gateway_test.client().offset_encoding")
            assert encoding == "utf-8"
            assert lua(editor, "return gateway_test.run_action(1, 2, 'Refactor: Simplify')")
            expected = ["def label():", '    text = "héllo ✓"; count = 2', "    return text, count"]
            wait_for(lambda: editor.current.buffer[:] == expected, 30, "the refactor's edit")


def test_another_open_file_joins_the_prompt_as_context(tmp_path: Path) -> None:
    """Two files open in Neovim: the prompt for the one being typed in carries a chunk of the
    other, which defines the function being called."""
    signature = "def frobnicate_widget(widget, force=1.0):"
    with FakeLLMServer(Behaviour(text="nicate_widget(part)\n")) as endpoint:
        config = one_endpoint_config(tmp_path, endpoint.base_url)
        widgets = tmp_path / "widgets.py"
        widgets.write_text(f'{signature}\n    """Turn a widget inside out."""\n    return widget\n')
        main = tmp_path / "main.py"
        main.write_text("from widgets import frobnicate_widget\n\npart = object()\n\n")
        with neovim(tmp_path, config) as editor:
            open_attached(editor, widgets)
            editor.command(f"split {main}")
            wait_for(
                lambda: status(editor).get("context", {}).get("chunks", 0) >= 2,
                STARTUP_S,
                "both files' chunks in the context store",
            )
            editor.input("4GA")
            editor.input("result = frob")
            ghost = wait_for(
                lambda: lua(editor, "return gateway_test.ghost_text()"), 15, "ghost text"
            )
            assert "nicate_widget" in ghost
    prompt = endpoint.requests[-1].json["prompt"]
    whole_file = "# path: widgets.py\n" + widgets.read_text()  # the ring's chunk, body and all
    assert whole_file in prompt
    assert prompt.endswith("# path: main.py\n" + main.read_text()[:-1] + "result = frob")

"""The VS Code extension in a real VS Code: code-server in Chromium, typing in a Python file.

code-server (VS Code 1.100 in the browser) gets the extension's packaged `.vsix`, user settings
that point it at this repository's server (`<python> -m lsp_server`) and, but for the newcomer's
set-up, at a configuration file, and opens a workspace with a Python file.
`clients/vscode/e2e/code-server/drive.mjs` then drives Chromium through puppeteer-core as a user
would: types, waits for the ghost text, reads the status bar, accepts with Tab and runs
"gateway-ls: Show Routing Status" and "gateway-ls: Toggle Offline Mode". Screenshots go to
`artifacts/`.

`make test-vscode` installs the pieces (scripts/install-code-server.sh) and builds the `.vsix`
(`make vsix` alone builds it);
without them these tests are skipped, naming what is missing (in CI they fail instead).
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
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.harness.busy_machine import one_core_busy
from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.processes import free_port
from lsp_server.backends.model_presets import PRESETS, QWEN_CODER_0_5B
from tests.support.mercury_upstream import finish_the_rename
from tests.support.real_tools import require_preset, tool_missing

REPO = Path(__file__).resolve().parents[2]
EXTENSION_DIR = REPO / "clients" / "vscode"
# What `make vsix` leaves: the packaged extension at the version it declares.
_VERSION = json.loads((EXTENSION_DIR / "package.json").read_text(encoding="utf-8"))["version"]
VSIX = EXTENSION_DIR / f"gateway-ls-{_VERSION}.vsix"
DRIVER = EXTENSION_DIR / "e2e" / "code-server" / "drive.mjs"
NEXT_EDIT_DRIVER = EXTENSION_DIR / "e2e" / "code-server" / "next-edit.mjs"
CODE_SERVER = Path(
    os.environ.get(
        "GATEWAY_LS_CODE_SERVER",
        EXTENSION_DIR / ".cache" / "code-server" / "node_modules" / "code-server",
    )
)
CHROMIUM = os.environ.get("GATEWAY_LS_CHROMIUM", "/usr/bin/chromium")
OFFLINE_EXAMPLE = REPO / "examples" / "offline.toml"
ARTIFACTS = REPO / "artifacts" / "vscode"
START_TIMEOUT_S = 120
DRIVE_TIMEOUT_S = 300
STEP_TIMEOUT_MS = 90_000
MODEL_LOAD_TIMEOUT_S = 240  # the bundled model loading on a loaded machine
# The shipped local budget is 1.5 s; the rest is VS Code's debounce and rendering on a busy machine.
GHOST_WAIT_MS = 8_000

DOCUMENT = "def add(a, b):\n    \n"

pytestmark = [pytest.mark.slow, pytest.mark.editor]


def missing_pieces() -> list[str]:
    missing = []
    if shutil.which("node") is None:
        missing.append("node")
    if not (CODE_SERVER / "out" / "node" / "entry.js").is_file():
        missing.append(f"code-server in {CODE_SERVER}")
    if not Path(CHROMIUM).is_file():
        missing.append(f"chromium ({CHROMIUM})")
    if not VSIX.is_file():
        missing.append(f"the extension package {VSIX.name} (make vsix)")
    if not (EXTENSION_DIR / "node_modules" / "puppeteer-core").is_dir():
        missing.append("puppeteer-core (npm ci in clients/vscode)")
    return missing


@pytest.fixture(scope="module", autouse=True)
def pieces() -> None:
    missing = missing_pieces()
    if missing:
        tool_missing(
            f"missing {', '.join(missing)}: run `make test-vscode` to install and build them"
        )
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # an earlier run's screenshots would mislead


def code_server_command(*args: str) -> list[str]:
    return ["node", str(CODE_SERVER / "out" / "node" / "entry.js"), *args]


class CodeServer:
    """code-server with its own user data, extensions and XDG folders, all under one directory."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.user_data = home / "user-data"
        self.extensions = home / "extensions"
        # No user configuration file or statistics of this machine's own; the bundled model's
        # cache is shared.
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "GATEWAY_LS_CONFIG"},
            # The server the extension starts is this checkout's, with this checkout's Python.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "XDG_CONFIG_HOME": str(home / "xdg-config"),
            "XDG_DATA_HOME": str(home / "xdg-data"),
            "XDG_STATE_HOME": str(home / "xdg-state"),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home / "code-server.log"

    def common_args(self) -> list[str]:
        return [
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
            "--config",
            str(self.home / "code-server.yaml"),
        ]

    def install_extension(self, vsix: Path) -> None:
        completed = subprocess.run(
            code_server_command(*self.common_args(), "--install-extension", str(vsix)),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
        assert completed.returncode == 0, completed.stdout + completed.stderr
        assert (self.extensions / "extensions.json").is_file(), completed.stdout

    def write_user_settings(self, settings: dict[str, Any]) -> None:
        user = self.user_data / "User"
        user.mkdir(parents=True, exist_ok=True)
        (user / "settings.json").write_text(json.dumps(settings, indent=2))

    def start(self, workspace: Path) -> str:
        port = free_port()
        (self.home / "code-server.yaml").write_text("auth: none\ncert: false\n")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                code_server_command(
                    *self.common_args(),
                    "--bind-addr",
                    f"127.0.0.1:{port}",
                    "--auth",
                    "none",
                    "--disable-telemetry",
                    "--disable-update-check",
                    "--disable-workspace-trust",
                    "--disable-getting-started-override",
                    str(workspace),
                ),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        root = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                with urllib.request.urlopen(root + "healthz", timeout=5) as answer:
                    if answer.status == 200:
                        return f"{root}?folder={workspace}"
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        raise AssertionError(f"code-server did not answer in {START_TIMEOUT_S} s")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)

    def extension_log(self) -> list[str]:
        """The lines of the extension's output channel (the Output panel's "gateway-ls")."""
        logs = sorted(self.user_data.glob("logs/*/exthost*/gateway-ls.gateway-ls/gateway-ls.log"))
        return [line for log in logs for line in log.read_text(errors="replace").splitlines()]

    def keep_logs(self, folder: Path) -> None:
        """code-server's log and VS Code's (the extension's output channel among them)."""
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        if self.log.is_file():
            shutil.copy(self.log, folder)
        if (self.user_data / "logs").is_dir():
            shutil.copytree(self.user_data / "logs", folder / "logs")


@pytest.fixture
def code_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[CodeServer]:
    server = CodeServer(tmp_path / "code-server")
    server.home.mkdir()
    server.install_extension(VSIX)
    try:
        yield server
    finally:
        server.stop()
        server.keep_logs(ARTIFACTS / request.node.name)


def base_settings(config: Path | None) -> dict[str, Any]:
    """User settings: this checkout's server and config file (None: none), a quiet workbench."""
    return {
        "gatewayLs.pythonPath": sys.executable,
        **({"gatewayLs.configPath": str(config)} if config is not None else {}),
        "editor.inlineSuggest.enabled": True,
        "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
        "editor.suggestOnTriggerCharacters": False,
        "editor.minimap.enabled": False,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.enableExperiments": False,
        "security.workspace.trust.enabled": False,
        "extensions.ignoreRecommendations": True,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
    }


class Driver:
    """The browser driver (drive.mjs) running a plan; `report` waits for what it saw."""

    def __init__(self, url: str, script: Path = DRIVER, **plan: Any) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        full_plan = {
            "url": url,
            "artifacts": str(ARTIFACTS),
            "browser": CHROMIUM,
            "timeoutMs": STEP_TIMEOUT_MS,
            **plan,
        }
        # Its stderr goes to a file beside the screenshots: a pipe nobody reads until the end
        # could fill up.
        self.prefix = plan.get("prefix", "vscode")
        self._stderr = ARTIFACTS / f"{self.prefix}-driver-stderr.log"
        with self._stderr.open("w") as stderr:
            self.process = subprocess.Popen(
                ["node", str(script), json.dumps(full_plan)],
                cwd=EXTENSION_DIR,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )

    def report(self) -> dict[str, Any]:
        """What the driver saw, failing the test with it when a step failed."""
        try:
            stdout, _ = self.process.communicate(timeout=DRIVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            stdout, _ = self.process.communicate()
        stderr = self._stderr.read_text(errors="replace")
        lines = stdout.strip().splitlines()
        report = json.loads(lines[-1]) if lines else {}
        assert self.process.returncode == 0, (
            f"{report.get('error') or stderr}\nsteps: {report.get('steps')}\n"
            f"report: {json.dumps(report)[:2000]}\nscreenshots: {ARTIFACTS}"
        )
        if report.get("reloads"):
            # Not the extension's doing (see `openFileWithServer` in workbench.mjs), but said in
            # the run's summary, so that a window that keeps losing its settings is noticed.
            warnings.warn(
                f"{self.prefix}: the window came up without the user's "
                "settings and was reloaded once",
                stacklevel=2,
            )
        return report


def drive(url: str, script: Path = DRIVER, **plan: Any) -> dict[str, Any]:
    """Runs the browser driver; returns its report, failing the test with it when a step failed."""
    return Driver(url, script, **plan).report()


def workspace_with_document(root: Path) -> Path:
    workspace = root / "project"
    workspace.mkdir()
    (workspace / "add.py").write_text(DOCUMENT)
    return workspace


def test_ghost_text_from_an_openai_compatible_endpoint(
    code_server: CodeServer, tmp_path: Path
) -> None:
    with FakeLLMServer(Behaviour(text="a + b"), name="fake") as endpoint:
        config = tmp_path / "config.toml"
        config.write_text(
            "[routing]\n"
            'offline = "never"\n'
            # Loopback answers at once; the margin is for a loaded test machine.
            "inline_deadline_ms = 3000\n"
            "hedge_after_ms = 2000\n"
            "[local]\n"
            "enabled = false\n"
            "[[endpoints]]\n"
            'name = "fake-fim"\n'
            'kind = "openai"\n'
            f'base_url = "{endpoint.base_url}"\n'
            'model = "fake-model"\n'
            'roles = ["inline"]\n'
            "fim = true\n"
        )
        code_server.write_user_settings(base_settings(config))
        url = code_server.start(workspace_with_document(tmp_path))

        report = drive(
            url,
            file="add.py",
            line=2,
            type="return ",
            ghostText="a + b",
            statusText="fake-model",
            suggestWidget=True,
            prefix="fake-endpoint",
        )

        assert "def add(a, b):" in endpoint.received_text()
    assert "a + b" in report["ghostText"]
    # Shown once, as ghost text: not also as an item in the suggest widget.
    assert not [row for row in report["suggestRows"] if "a + b" in row], report["suggestRows"]
    assert "fake-model" in report["statusBar"]
    assert "null" not in report["statusBar"]
    assert "fake-fim" in report["routingStatus"]
    # VS Code ran the accepted item's command: the acceptance reached the server, which counts
    # it for the endpoint (offered, accepted, acceptance, kept: not measured yet).
    assert "Inline suggestions" in report["routingStatus"]
    inline = report["routingStatus"].split("Inline suggestions", 1)[1]
    assert re.search(r"fake-fim\s+\d+\s+1\s+\d+ %", inline), report["routingStatus"]
    assert "offline" in report["statusBarOffline"]
    assert any('offline mode is now "always"' in note for note in report["notifications"])
    code_server.stop()
    assert_no_errors_logged(code_server)


SCALE = "def scale(value, factor):\n    result = value * factor\n    return result\n"


def mercury_config(directory: Path, mercury: FakeLLMServer) -> Path:
    """One next-edit endpoint, a scripted Mercury; no local model and no inline endpoint."""
    config = directory / "config.toml"
    config.write_text(
        '[routing]\noffline = "never"\nedit_deadline_ms = 5000\n[local]\nenabled = false\n'
        '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
        f'base_url = "{mercury.provider_base_url("inception")}"\n'
        'model = "mercury-edit-2"\nroles = ["edit"]\n'
    )
    return config


def rename_plan(**more: Any) -> dict[str, Any]:
    """`value` becomes `amount` in the signature, typed; the next edit renames its use below."""
    return {
        "file": "scale.py",
        "line": 1,
        "column": len("def scale(value"),
        "erase": len("value"),
        "type": "amount",
        "removed": "value",
        "added": "amount",
        "applied": "    result = amount * factor",
        **more,
    }


def next_edit_workspace(root: Path) -> Path:
    workspace = root / "project"
    workspace.mkdir()
    (workspace / "scale.py").write_text(SCALE)
    return workspace


def test_a_next_edit_appears_away_from_the_cursor_and_applies(
    code_server: CodeServer, tmp_path: Path
) -> None:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        code_server.env["INCEPTION_API_KEY"] = "test-key"
        code_server.write_user_settings(base_settings(mercury_config(tmp_path, mercury)))
        workspace = next_edit_workspace(tmp_path)
        url = code_server.start(workspace)

        report = drive(url, NEXT_EDIT_DRIVER, **rename_plan(prefix="next-edit"))

        asked = [r for r in mercury.requests if r.path.endswith("/edit/completions")]
        assert asked, "the next edit was not asked of the Mercury endpoint"
        assert "+def scale(amount, factor):" in asked[-1].payload["messages"][-1]["content"]
    assert report["shownLines"][1].startswith("    result = value"), report["shownLines"]
    assert_the_use_below_was_renamed(report)
    code_server.stop()
    assert_no_errors_logged(code_server)


def test_a_ghost_text_gives_way_to_a_next_edit_drawn_elsewhere(
    code_server: CodeServer, tmp_path: Path
) -> None:
    """One suggestion at a time: a ghost text at the cursor while the rename is typed, then
    the next edit drawn below hides it, and Tab goes to the edit, not into the ghost text. The
    pause before the next edit is long enough for the ghost text to be seen first."""
    with (
        FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury,
        FakeLLMServer(Behaviour(text="_in_cents"), name="fim") as inline,
    ):
        code_server.env["INCEPTION_API_KEY"] = "test-key"
        config = mercury_config(tmp_path, mercury)
        config.write_text(
            config.read_text().replace("[routing]\n", "[routing]\ninline_deadline_ms = 3000\n")
            + '[[endpoints]]\nname = "fim"\nkind = "openai"\n'
            f'base_url = "{inline.base_url}"\nmodel = "fake-model"\nroles = ["inline"]\n'
            "fim = true\n"
        )
        code_server.write_user_settings(
            {**base_settings(config), "gatewayLs.nextEdit.delayMs": 2500}
        )
        url = code_server.start(next_edit_workspace(tmp_path))

        report = drive(
            url,
            NEXT_EDIT_DRIVER,
            **rename_plan(ghostText="_in_cents", prefix="ghost-then-next-edit"),
        )

    assert "_in_cents" in report["ghostBefore"], report
    assert_the_use_below_was_renamed(report)
    code_server.stop()
    assert_no_errors_logged(code_server)


def test_esc_dismisses_a_next_edit_and_tab_is_tab_again(
    code_server: CodeServer, tmp_path: Path
) -> None:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount"))) as mercury:
        code_server.env["INCEPTION_API_KEY"] = "test-key"
        code_server.write_user_settings(base_settings(mercury_config(tmp_path, mercury)))
        url = code_server.start(next_edit_workspace(tmp_path))

        report = drive(url, NEXT_EDIT_DRIVER, **rename_plan(dismiss=True, prefix="dismissed"))

    lines = report["dismissedLines"]
    assert lines[1] == "    result = value * factor"  # not applied
    # Tab inserted indentation at the cursor (in the signature), as it does with no edit shown.
    assert lines[0] != "def scale(amount, factor):" and "amount" in lines[0]
    code_server.stop()
    assert_no_errors_logged(code_server)


@pytest.mark.model
def test_a_next_edit_from_the_local_coder_preset_offline(
    code_server: CodeServer, tmp_path: Path
) -> None:
    """Offline, the shipped example with the Qwen2.5-Coder 0.5B preset: the rename typed in
    the signature, the cursor just after the new name where typing left it, and the local
    model's next edit renames the use below; Tab goes there, Tab applies it. The edit deadline
    is generous: this answer takes 2.2 s on two free cores and 4 to 7 s on one
    (bench/bench_local_edit.py, mostly reading its prompt), past the shipped 1.5 s, and the
    suite loads the machine further; the first request also waits for the model to load."""
    require_preset(QWEN_CODER_0_5B)
    config = tmp_path / "offline.toml"
    config.write_text(
        OFFLINE_EXAMPLE.read_text()
        .replace("[routing]\n", "[routing]\nedit_deadline_ms = 120000\n")
        .replace("[local]\n", f'[local]\nmodel = "{QWEN_CODER_0_5B.name}"\n')
    )
    # Ghost text on: the one local model also suggests while the rename is typed, and the
    # next edit drawn below takes the ghost text's place.
    code_server.write_user_settings(base_settings(config))
    url = code_server.start(next_edit_workspace(tmp_path))

    report = drive(
        url,
        NEXT_EDIT_DRIVER,
        **rename_plan(prefix="local-next-edit", timeoutMs=MODEL_LOAD_TIMEOUT_S * 1000),
    )

    assert_the_use_below_was_renamed(report)
    code_server.stop()
    assert_no_errors_logged(code_server)


def assert_the_use_below_was_renamed(report: dict[str, Any]) -> None:
    """Drawn on the line below the cursor's (the old use struck through, the new one beside
    it, a gutter mark) and alone on screen, no ghost text beside it, then applied."""
    assert report["struck"] == ["value"], report
    assert "amount" in report["beside"], report
    assert report["gutterMarks"] >= 1
    assert report["ghostWhileShown"] == "", report
    assert report["ghostAfterJump"] == "", report
    assert report["appliedLines"][:3] == [
        "def scale(amount, factor):",
        "    result = amount * factor",
        "    return result",
    ]


def assert_no_errors_logged(code_server: CodeServer) -> None:
    """A normal run shows no error in the Output panel (start-up lines are no errors)."""
    log = code_server.extension_log()
    assert any("Starting" in line for line in log), log
    errors = [line for line in log if "[error]" in line]
    assert errors == [], "\n".join(log[-40:])


def wait_for_local_model(code_server: CodeServer, driver: Driver) -> None:
    """Waits until the server the extension started has loaded its local model, as its progress
    in the status bar says; reads the status the server publishes for `gateway-ls stats`."""
    published = Path(code_server.env["XDG_STATE_HOME"]) / "gateway-ls" / "run"
    deadline = time.monotonic() + MODEL_LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        if driver.process.poll() is not None:
            driver.report()  # the driver stopped early: fails the test with what it saw
        for path in published.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                if json.loads(path.read_text()).get("local", {}).get("state") == "ready":
                    return
        time.sleep(0.5)
    driver.process.kill()
    raise AssertionError(f"the local model was not ready within {MODEL_LOAD_TIMEOUT_S} s")


@pytest.mark.model
def test_ghost_text_from_the_bundled_model(
    code_server: CodeServer, tmp_path: Path, bundled_model_path: Path
) -> None:
    """The main job as a newcomer meets it: the shipped defaults, one core busy.

    For a VS Code newcomer the shipped defaults are no configuration file at all, not
    `examples/offline.toml`: the README's VS Code set-up is the server and the extension ("No
    file at all is valid: the server then runs on the bundled local model alone"), and the
    extension sends only the settings the user set, here none but where the server is. So the
    server gets no `--config` and finds no file in the user config dir: the local budget of
    1500 ms (no remote endpoint, so the local model's budget), half the cores. The model loads as
    the editor connects; once it is ready, a build starts beside the editor and the user types.
    A keystroke whose suggestion misses the budget shows nothing, so the last character may be
    retyped once, as in the Neovim test.
    """
    code_server.write_user_settings(base_settings(None))
    url = code_server.start(workspace_with_document(tmp_path))
    go = tmp_path / "model-ready"
    driver = Driver(
        url,
        file="add.py",
        line=2,
        type="return ",
        typeAfterFile=str(go),
        readyWaitMs=MODEL_LOAD_TIMEOUT_S * 1000,
        ghostText="",
        # Which request the status bar names last depends on the machine's load: any of them.
        statusText="",
        attempts=2,
        ghostWaitMs=GHOST_WAIT_MS,
        prefix="bundled-model",
    )
    wait_for_local_model(code_server, driver)
    with one_core_busy():
        go.touch()
        report = driver.report()

    assert report["ghostText"].strip()
    assert "null" not in report["statusBar"]
    # No endpoint is configured: the ghost text can only have come from a local model, the
    # bundled one or another installed preset that `model = "auto"` found faster here.
    served = [
        p.file_name for p in PRESETS.values() if f"{p.file_name} (ready)" in report["routingStatus"]
    ]
    assert served, report["routingStatus"]
    code_server.stop()
    assert_no_errors_logged(code_server)

"""The VS Code extension in a real VS Code: code-server in Chromium, typing in a Python file.

code-server (VS Code 1.100 in the browser) gets the extension's packaged `.vsix`, user settings
that point it at this repository's server (`<python> -m lsp_server`) and a configuration file,
and opens a workspace with a Python file. `clients/vscode/e2e/code-server/drive.mjs` then drives
Chromium through puppeteer-core as a user would: types, waits for the ghost text, reads the status
bar, accepts with Tab and runs "gateway-ls: Show Routing Status" and "gateway-ls: Toggle Offline
Mode". Screenshots go to `artifacts/`.

`make test-vscode` installs the pieces (scripts/install-code-server.sh) and builds the `.vsix`;
without them these tests are skipped, naming what is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_llm_server import Behaviour, FakeLLMServer

REPO = Path(__file__).resolve().parents[2]
EXTENSION_DIR = REPO / "clients" / "vscode"
VSIX = EXTENSION_DIR / "gateway-ls.vsix"
DRIVER = EXTENSION_DIR / "e2e" / "code-server" / "drive.mjs"
CODE_SERVER = Path(
    os.environ.get(
        "GATEWAY_LS_CODE_SERVER",
        EXTENSION_DIR / ".cache" / "code-server" / "node_modules" / "code-server",
    )
)
CHROMIUM = os.environ.get("GATEWAY_LS_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "artifacts" / "vscode"
START_TIMEOUT_S = 120
DRIVE_TIMEOUT_S = 300
STEP_TIMEOUT_MS = 90_000

DOCUMENT = "def add(a, b):\n    \n"

pytestmark = pytest.mark.slow


def missing_pieces() -> list[str]:
    missing = []
    if shutil.which("node") is None:
        missing.append("node")
    if not (CODE_SERVER / "out" / "node" / "entry.js").is_file():
        missing.append(f"code-server in {CODE_SERVER}")
    if not Path(CHROMIUM).is_file():
        missing.append(f"chromium ({CHROMIUM})")
    if not VSIX.is_file():
        missing.append(f"the extension package {VSIX.name}")
    if not (EXTENSION_DIR / "node_modules" / "puppeteer-core").is_dir():
        missing.append("puppeteer-core (npm ci in clients/vscode)")
    return missing


@pytest.fixture(scope="module", autouse=True)
def pieces() -> None:
    missing = missing_pieces()
    if missing:
        pytest.skip(
            f"missing {', '.join(missing)}: run `make test-vscode` to install and build them"
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


def drive(url: str, **plan: Any) -> dict[str, Any]:
    """Runs the browser driver; returns its report, failing the test with it when a step failed."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    full_plan = {
        "url": url,
        "artifacts": str(ARTIFACTS),
        "browser": CHROMIUM,
        "timeoutMs": STEP_TIMEOUT_MS,
        **plan,
    }
    completed = subprocess.run(
        ["node", str(DRIVER), json.dumps(full_plan)],
        cwd=EXTENSION_DIR,
        capture_output=True,
        text=True,
        timeout=DRIVE_TIMEOUT_S,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines else {}
    assert completed.returncode == 0, (
        f"{report.get('error') or completed.stderr}\nsteps: {report.get('steps')}\n"
        f"report: {json.dumps(report)[:2000]}\nscreenshots: {ARTIFACTS}"
    )
    return report


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
            prefix="fake-endpoint",
        )

        assert "def add(a, b):" in endpoint.received_text()
    assert "a + b" in report["ghostText"]
    assert "fake-model" in report["statusBar"]
    assert "null" not in report["statusBar"]
    assert "fake-fim" in report["routingStatus"]
    assert "offline" in report["statusBarOffline"]
    assert any('offline mode is now "always"' in note for note in report["notifications"])
    code_server.stop()
    assert_no_errors_logged(code_server)


def assert_no_errors_logged(code_server: CodeServer) -> None:
    """A normal run shows no error in the Output panel (start-up lines are no errors)."""
    log = code_server.extension_log()
    assert any("Starting" in line for line in log), log
    errors = [line for line in log if "[error]" in line]
    assert errors == [], "\n".join(log[-40:])


@pytest.mark.model
def test_ghost_text_from_the_bundled_model(
    code_server: CodeServer, tmp_path: Path, bundled_model_path: Path
) -> None:
    """No endpoint, no key, no network: the bundled model answers a keystroke.

    The shipped defaults but for the local budget: a test machine running other suites is far
    busier than a laptop, and whether 1.5 s suffice is measured in bench/, not asserted here.
    """
    config = tmp_path / "config.toml"
    config.write_text("[local]\ndeadline_ms = 15000\n")
    code_server.write_user_settings(base_settings(config))
    url = code_server.start(workspace_with_document(tmp_path))

    report = drive(
        url,
        file="add.py",
        line=2,
        type="return ",
        ghostText="",
        # Which request the status bar names last depends on the machine's load: any of them.
        statusText="",
        # A busy machine may still miss it once; a user types on.
        attempts=2,
        ghostWaitMs=30_000,
        prefix="bundled-model",
    )

    assert report["ghostText"].strip()
    assert "null" not in report["statusBar"]
    # No endpoint is configured: the ghost text can only have come from the bundled model.
    assert f"{bundled_model_path.name} (ready)" in report["routingStatus"], report["routingStatus"]
    code_server.stop()
    assert_no_errors_logged(code_server)

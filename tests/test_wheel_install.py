"""The package as a user installs it: the wheel built from this tree, installed with the `local`
extra into a fresh virtual environment, runs `doctor` and the demo's suggestion. A module or a
package-data file the wheel leaves out fails here, where the checkout would hide it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.lsp_session import server_env

pytestmark = [pytest.mark.slow, pytest.mark.model]

REPO = Path(__file__).resolve().parents[1]
# Files the package reads at run time, beside its modules.
PACKAGE_DATA = ("lsp_server/backends/licences/Qwen2.5-Coder-Apache-2.0.txt",)


def run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=server_env(cwd),
        check=False,
    )


def build_wheel(out: Path) -> Path:
    out.mkdir()
    built = run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)], out, 600
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = out.glob("gateway_ls-*.whl")
    return wheel


def test_the_wheel_installed_with_the_local_extra_runs_doctor_and_the_demo(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(PACKAGE_DATA) <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)

    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", str(venv)], tmp_path, 120).returncode == 0
    # llama-cpp-python compiles the first time; pip's cache keeps the wheel after that.
    installed = run(
        [str(venv / "bin" / "pip"), "install", "--quiet", f"{wheel}[local]"], tmp_path, 1800
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    where = run(
        [str(venv / "bin" / "python"), "-c", "import lsp_server; print(lsp_server.__file__)"],
        tmp_path,
        60,
    )
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr

    gateway_ls = str(venv / "bin" / "gateway-ls")
    offline = str(REPO / "examples" / "offline.toml")
    doctor = run([gateway_ls, "--config", offline, "doctor"], tmp_path, 600)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    demo = run(
        [gateway_ls, "--config", offline, "complete", f"{REPO / 'examples' / 'demo.py'}:6:5"],
        tmp_path,
        600,
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.strip()

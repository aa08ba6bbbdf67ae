"""Hot reload of the configuration file."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from lsp_server.config.loader import ConfigError, load_config_file, read_config_text
from lsp_server.config.model import Config
from lsp_server.config.watcher import ConfigWatcher

INTERVAL_S = 0.02
WAIT_S = 5.0


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Config] = []
        self.errors: list[ConfigError] = []

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not condition():
                await asyncio.sleep(INTERVAL_S)

    async def quiet_polls(self, count: int = 10) -> None:
        """Let the watcher poll a few times, to show that nothing more is reported."""
        await asyncio.sleep(INTERVAL_S * count)


def write(path: Path, text: str) -> None:
    """Write so the change is visible to stat even on coarse-mtime filesystems."""
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def deadline(ms: int) -> str:
    return f"[routing]\ninline_deadline_ms = {ms}\n"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(deadline(300))
    return path


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@contextlib.asynccontextmanager
async def running(watcher: ConfigWatcher) -> AsyncIterator[ConfigWatcher]:
    await watcher.start()
    try:
        yield watcher
    finally:
        await watcher.stop()


@pytest.fixture
async def watcher(config_path: Path, recorder: Recorder) -> AsyncIterator[ConfigWatcher]:
    load_config_file(config_path)
    watch = ConfigWatcher(
        config_path,
        recorder.changes.append,
        recorder.errors.append,
        interval_s=INTERVAL_S,
        settle_s=0.1,
    )
    async with running(watch):
        yield watch


async def test_change_is_picked_up(
    watcher: ConfigWatcher, config_path: Path, recorder: Recorder
) -> None:
    write(config_path, deadline(500))
    await recorder.wait_for(lambda: len(recorder.changes) == 1)
    assert recorder.changes[0].routing.inline_deadline_ms == 500
    assert recorder.changes[0].source == config_path
    assert recorder.errors == []


async def test_invalid_change_is_reported_once(
    watcher: ConfigWatcher, config_path: Path, recorder: Recorder
) -> None:
    write(config_path, deadline(300) + "hedge_after = 5\n")
    await recorder.wait_for(lambda: len(recorder.errors) == 1)
    # The same mistake saved again is not news.
    write(config_path, deadline(300) + "hedge_after = 5\n")
    await recorder.quiet_polls()
    assert len(recorder.errors) == 1
    error = recorder.errors[0]
    assert (error.file, error.line, error.key) == (str(config_path), 3, "routing.hedge_after")
    assert recorder.changes == []

    write(config_path, deadline(400))
    await recorder.wait_for(lambda: len(recorder.changes) == 1)
    assert recorder.changes[0].routing.inline_deadline_ms == 400


async def test_half_written_file_is_not_reported(config_path: Path, recorder: Recorder) -> None:
    watch = ConfigWatcher(
        config_path,
        recorder.changes.append,
        recorder.errors.append,
        interval_s=INTERVAL_S,
        settle_s=1.0,
    )
    async with running(watch):
        write(config_path, '[routing]\noffline = "alw')
        await recorder.quiet_polls()
        write(config_path, '[routing]\noffline = "always"\n')
        await recorder.wait_for(lambda: len(recorder.changes) == 1)
    assert recorder.changes[0].routing.offline == "always"
    assert recorder.errors == []


async def test_deleted_file_reported_once_then_restored(
    watcher: ConfigWatcher, config_path: Path, recorder: Recorder
) -> None:
    config_path.unlink()
    await recorder.wait_for(lambda: len(recorder.errors) == 1)
    await recorder.quiet_polls()
    assert len(recorder.errors) == 1
    assert "deleted" in recorder.errors[0].message
    assert recorder.changes == []

    write(config_path, deadline(450))
    await recorder.wait_for(lambda: len(recorder.changes) == 1)
    assert recorder.changes[0].routing.inline_deadline_ms == 450
    assert len(recorder.errors) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
async def test_unreadable_file_reported_once_then_recovered(
    watcher: ConfigWatcher, config_path: Path, recorder: Recorder
) -> None:
    write(config_path, deadline(600))
    config_path.chmod(0)
    await recorder.wait_for(lambda: len(recorder.errors) == 1)
    await recorder.quiet_polls()
    assert len(recorder.errors) == 1
    assert "cannot read" in recorder.errors[0].message

    config_path.chmod(0o644)
    await recorder.wait_for(lambda: len(recorder.changes) == 1)
    assert recorder.changes[0].routing.inline_deadline_ms == 600


async def test_default_location_is_watched_when_there_is_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorder: Recorder
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    watch = ConfigWatcher(
        None, recorder.changes.append, recorder.errors.append, interval_s=INTERVAL_S
    )
    async with running(watch):
        watch.path.parent.mkdir(parents=True)
        write(watch.path, deadline(700))
        await recorder.wait_for(lambda: len(recorder.changes) == 1)
        assert recorder.changes[0].routing.inline_deadline_ms == 700

        watch.path.unlink()
        await recorder.wait_for(lambda: len(recorder.changes) == 2)
        assert recorder.changes[1] == Config()
    assert recorder.errors == []


async def test_path_turned_into_a_directory_is_reported_once(
    watcher: ConfigWatcher, config_path: Path, recorder: Recorder
) -> None:
    config_path.unlink()
    config_path.mkdir()
    await recorder.wait_for(lambda: any("cannot read" in e.message for e in recorder.errors))
    await recorder.quiet_polls()
    assert sum("cannot read" in e.message for e in recorder.errors) == 1

    config_path.rmdir()
    write(config_path, deadline(650))
    await recorder.wait_for(lambda: len(recorder.changes) == 1)
    assert recorder.changes[0].routing.inline_deadline_ms == 650


@pytest.mark.parametrize("read_number", [1, 3], ids=["at-start", "while-settling"])
async def test_a_write_landing_just_after_a_read_is_still_applied(
    config_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, read_number: int
) -> None:
    """The save lands between the watcher's read and its stat: the stat must not stand for
    the text read before it, or the save is never seen (the file then never changes again)."""
    from lsp_server.config import watcher as watcher_module

    real_read = read_config_text  # what the watcher calls until it is patched below
    reads = 0

    def read_then_save(path: Path) -> str:
        nonlocal reads
        text = real_read(path)
        reads += 1
        if reads == read_number:
            write(config_path, deadline(700))
        return text

    loaded = load_config_file(config_path)
    if read_number == 3:  # a first save starts the poll whose settling read meets the second
        write(config_path, deadline(600))
    monkeypatch.setattr(watcher_module, "read_config_text", read_then_save)
    watch = ConfigWatcher(
        config_path,
        recorder.changes.append,
        recorder.errors.append,
        loaded=loaded,
        interval_s=INTERVAL_S,
        settle_s=0.05,
    )
    async with running(watch):
        await recorder.wait_for(
            lambda: any(c.routing.inline_deadline_ms == 700 for c in recorder.changes)
        )
    assert recorder.changes[-1].routing.inline_deadline_ms == 700
    assert recorder.errors == []

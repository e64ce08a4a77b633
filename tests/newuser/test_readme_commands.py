"""The README's run command, as a new user runs it on a fresh clone.

`scripts/workbench` installs without the dev group. Everything the headline features need
(record, open, analyse) must come with that install: the tests build such an environment
from the tracked files alone and use only its own interpreter and `mailbus` command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("tmux") is None, reason="needs tmux (scripts/system-packages.txt)"
    ),
]


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    return [name for name in out.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's files in a new directory, installed the way scripts/workbench does."""
    clone = tmp_path_factory.mktemp("fresh") / "mailbus"
    for name in _tracked_files():
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    workbench = (clone / "scripts" / "workbench").read_text()
    install = next(line for line in workbench.splitlines() if line.startswith("scripts/bootstrap"))
    env = {**os.environ, "PATH": f"{Path.home() / '.local/bin'}:{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(install.split(), cwd=clone, env=env, check=True, timeout=600)
    return clone


def _run(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(clone / ".venv/bin/mailbus"), *args],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_run_install_is_runtime_only(fresh_clone: Path) -> None:
    # Proves the environment is the README's run install, not the test one: the dev
    # group's hypothesis is absent (pytest is there: the workbench runs users' tests).
    probe = subprocess.run(
        [str(fresh_clone / ".venv/bin/python"), "-c", "import hypothesis"],
        capture_output=True,
        timeout=60,
    )
    assert probe.returncode != 0


def test_record_and_analyse_with_the_run_install(fresh_clone: Path) -> None:
    session = fresh_clone / "recorded"
    recorded = _run(fresh_clone, "record", str(session), "--demo", "--seconds", "1.5")
    assert recorded.returncode == 0, recorded.stderr
    manifest = json.loads((session / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert list(session.glob("part-*.parquet"))

    analysed = _run(fresh_clone, "analyze", str(session), "--format", "json")
    assert analysed.returncode == 0, analysed.stderr
    topics = {row["topic"] for row in json.loads(analysed.stdout)["topics"]}
    assert {"robot/pose", "sensors/temperature"} <= topics


@pytest.fixture
def tmux_session() -> Iterator[str]:
    name = f"mailbus-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, timeout=30)


def _screen_shows(name: str, *texts: str) -> str:
    """Polls the terminal until every text is on screen; bounded by DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    screen = ""
    while time.monotonic() < deadline:
        captured = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True, timeout=30
        )
        screen = captured.stdout
        if all(text in screen for text in texts):
            return screen
        time.sleep(0.2)  # a terminal has no change notification; bounded by the deadline
    raise AssertionError(f"screen never showed {texts!r}; last screen:\n{screen}")


def _start(name: str, clone: Path, command: str) -> None:
    env_path = f"{Path.home() / '.local/bin'}:{os.environ['PATH']}"
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            "-c",
            str(clone),
            f"env -u VIRTUAL_ENV PATH={env_path} TERM=xterm-256color {command}",
        ],
        check=True,
        timeout=30,
    )


def test_readme_run_command_opens_the_demo(fresh_clone: Path, tmux_session: str) -> None:
    _start(tmux_session, fresh_clone, "./scripts/workbench")
    screen = _screen_shows(tmux_session, "embedded demo", "robot", "sensors")
    assert "Traceback" not in screen


def test_open_a_recording_with_the_run_install(fresh_clone: Path, tmux_session: str) -> None:
    session = fresh_clone / "to-open"
    assert _run(fresh_clone, "record", str(session), "--demo", "--seconds", "1").returncode == 0
    _start(tmux_session, fresh_clone, f".venv/bin/mailbus open {session}")
    screen = _screen_shows(tmux_session, "to-open:", "status complete")
    assert "Traceback" not in screen


EVERY_MODULE = """
import importlib, pkgutil
for top in ("mailbus", "mailbus_workbench"):
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            print(f"{info.name}|{exc}")
"""

# The notebook parts need the `notebook` extra, which the run install leaves out: their
# modules import all the same, and their first use names the extra.
FIRST_USES = """
import polars as pl
from mailbus.notebook import Monitor
from mailbus.sessions import plot
rates = pl.DataFrame({"t_s": [0.0], "rate_hz": [1.0], "topic": ["a"]})
for use in (Monitor.demo, lambda: plot.plot_rates(rates)):
    try:
        use()
    except ModuleNotFoundError as exc:
        print(exc)
"""


def test_every_module_imports_with_the_run_install(fresh_clone: Path) -> None:
    out = subprocess.run(
        [str(fresh_clone / ".venv/bin/python"), "-c", EVERY_MODULE],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert out == ""


def test_the_notebook_parts_name_their_extra_at_first_use(fresh_clone: Path) -> None:
    out = subprocess.run(
        [str(fresh_clone / ".venv/bin/python"), "-c", FIRST_USES],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.splitlines()
    assert len(out) == 2 and all("pip install 'mailbus[notebook]'" in line for line in out), out


def test_mailbus_notebook_names_its_extra_with_the_run_install(
    fresh_clone: Path, tmp_path: Path
) -> None:
    result = _run(fresh_clone, "notebook", "--no-browser", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert "needs jupyterlab, anywidget, altair" in result.stderr
    assert "pip install 'mailbus[notebook]'" in result.stderr
    assert list(tmp_path.iterdir()) == []

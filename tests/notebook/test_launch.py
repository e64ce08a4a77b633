"""`mailbus notebook` without a browser: the extra it needs is named when missing, bad
input is refused, the live notebook is written once and valid; and `workbench(config)`
refuses a system other processes cannot reach."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from mailbus import cli
from mailbus.errors import ConfigError
from mailbus.notebook import launch, workbench


def test_a_missing_extra_is_named_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = launch.importlib.util.find_spec
    monkeypatch.setattr(
        launch.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "jupyterlab" else real(name, *a),
    )
    assert cli.main(["notebook", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "needs jupyterlab" in err and "pip install 'mailbus[notebook]'" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["notebook", "--config", "nowhere.toml"], "no such options file: nowhere.toml"),
        (["notebook", "--dir", "/nonexistent/dir"], "no such directory: /nonexistent/dir"),
    ],
)
def test_bad_input_is_refused(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(args) == 2
    assert says in capsys.readouterr().err


def test_the_live_notebook_is_written_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert launch.run_notebook(None, str(tmp_path), run=False) == 0
    path = tmp_path / "mailbus-live.ipynb"
    nbformat.validate(nbformat.read(path, as_version=4))
    assert "Monitor.demo(" in path.read_text()
    assert "wrote" in capsys.readouterr().out
    path.write_text(path.read_text().replace("Monitor.demo(", "Monitor.demo(speed=2, "))
    assert launch.run_notebook(None, str(tmp_path), run=False) == 0
    assert "as you left it" in capsys.readouterr().out
    assert "speed=2" in path.read_text()  # the user's edit kept


def test_a_config_gets_a_notebook_of_its_own_with_the_served_workbench(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text('transport = "postoffice"\n')
    assert launch.run_notebook(str(config), str(tmp_path), run=False) == 0
    cells = json.loads((tmp_path / "mailbus-lab.ipynb").read_text())["cells"]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert f"CONFIG = {str(config)!r}" in code
    assert "Monitor.from_options(CONFIG)" in code and "workbench(CONFIG)" in code


def test_the_command_runs_jupyterlab_on_the_notebook(tmp_path: Path) -> None:
    path = tmp_path / "mailbus-live.ipynb"
    command = launch.jupyter_command(path, ["--no-browser"])
    assert command[1:3] == ["-m", "jupyterlab"] and command[-1] == str(path)
    assert f"--ServerApp.root_dir={tmp_path}" in command and "--no-browser" in command


def test_a_served_workbench_needs_a_system_other_processes_reach(tmp_path: Path) -> None:
    inprocess = tmp_path / "here.toml"
    inprocess.write_text('transport = "inprocess"\n')
    with pytest.raises(ConfigError, match="reachable from its own process only"):
        workbench(inprocess)
    with pytest.raises(ConfigError, match="no such options file"):
        workbench(tmp_path / "missing.toml")

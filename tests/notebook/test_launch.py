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


def test_as_root_jupyterlab_is_told_to_allow_it() -> None:
    path = Path("/srv/mailbus-live.ipynb")
    assert "--allow-root" in launch.jupyter_command(path, ["--no-browser"], euid=0)
    assert "--allow-root" not in launch.jupyter_command(path, ["--no-browser"], euid=1000)
    given = launch.jupyter_command(path, ["--allow-root"], euid=0)
    assert given.count("--allow-root") == 1


@pytest.mark.slow
@pytest.mark.parametrize("flag", [[], ["--allow-root"]], ids=["as-is", "allow-root-given"])
def test_mailbus_notebook_as_root_starts_jupyterlab(tmp_path: Path, flag: list[str]) -> None:
    """In a container the user is root: JupyterLab refused to start ("Running as root is
    not recommended. Use --allow-root to bypass."), and our parser refused --allow-root.
    Here Jupyter's own configuration does not allow root, as on a fresh machine."""
    import os
    import secrets
    import sys

    if os.geteuid() != 0:
        pytest.skip("runs as root only: what a container's user is")
    from test_browser import free_port, lab, lab_env

    env = lab_env(tmp_path)
    (Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"ip": "127.0.0.1"}})  # root not allowed by configuration
    )
    root = tmp_path / "root"
    root.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    env["JUPYTER_TOKEN"] = token
    command = [
        *(sys.executable, "-m", "mailbus_workbench", "notebook", *flag),
        *("--no-browser", "--port", str(port), "--dir", str(root)),
    ]
    with lab(command, env, port, token):  # JupyterLab answers on its port
        assert (root / "mailbus-live.ipynb").exists()

"""The workbench's subcommands of the `mailbus` command: serve's argument errors, and the
TUI's absence from the core's import graph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mailbus.cli import main
from mailbus_workbench.serve import serve_command


@pytest.mark.slow
def test_serve_refuses_bad_arguments(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["serve", "--port", "0"]) == 2
    assert "port must be" in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "none.toml"), "serve", "--port", "8123"]) == 2
    assert "no such options file" in capsys.readouterr().err
    assert main(["open", str(tmp_path / "no-session")]) == 2
    assert "no session directory" in capsys.readouterr().err
    for empty in ("", "  "):  # not the working directory opened as a session
        assert main(["open", empty]) == 2
        assert "give a session directory or an .mcap file" in capsys.readouterr().err


def test_serve_command_runs_this_python_with_the_config(tmp_path: Path) -> None:
    config = tmp_path / "my options.toml"
    command = serve_command(str(config))
    assert command.startswith(sys.executable)
    assert "-m mailbus_workbench --viewer --config" in command
    assert f"'{config}'" in command  # quoted: the path has a space
    # Every tab is a viewer, also when the options come from $MAILBUS_CONFIG_FILE.
    assert serve_command(None).endswith("-m mailbus_workbench --viewer")


def test_core_and_model_import_without_textual() -> None:
    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name.split('.')[0] in ('textual', 'rich'):\n"
        "        raise ImportError('blocked ' + name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import mailbus, mailbus.demo\n"
        "import mailbus_workbench.model, mailbus_workbench.model.queues\n"
        "import mailbus_workbench.engine, workbench_fixtures.events\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

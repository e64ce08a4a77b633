"""The architecture contracts of pyproject.toml ([tool.importlinter]) hold for the tree,
and each one fails on a deliberate violation made in a copy of the packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
ENGINE = "The engine never imports the workbench or a terminal UI library"
SANS_IO = "Protocol codecs and state machines are sans-IO"
LAYERS = "Layers: the workbench on the engine; tools on transports; transports on the"


def _lint(source_root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{source_root / 'core'}:{source_root / 'workbench'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=source_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The two packages and the contracts, copied so that a test can break them."""
    for package in ("core/mailbus", "workbench/mailbus_workbench"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (tmp_path / "contracts.toml").write_text(_as_toml(config))
    return tmp_path


def _as_toml(config: dict[str, object]) -> str:
    def value(item: object) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, list):
            return "[" + ", ".join(value(v) for v in item) + "]"
        return '"' + str(item).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["[tool.importlinter]"]
    lines += [f"{k} = {value(v)}" for k, v in config.items() if k != "contracts"]
    for contract in config["contracts"]:  # type: ignore[attr-defined]
        lines.append("[[tool.importlinter.contracts]]")
        lines += [f"{k} = {value(v)}" for k, v in contract.items()]
    return "\n".join(lines) + "\n"


def _broken(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    return " ".join(result.stdout.split())


def test_the_tree_keeps_every_contract(copy: Path) -> None:
    result = _lint(copy, copy / "contracts.toml")
    assert result.returncode == 0, result.stdout
    assert "3 kept, 0 broken" in result.stdout


def test_core_importing_textual_breaks_the_engine_contract(copy: Path) -> None:
    (copy / "core/mailbus/violation.py").write_text("from textual.app import App\n")
    assert f"{ENGINE} BROKEN" in _broken(_lint(copy, copy / "contracts.toml"))


def test_core_importing_the_workbench_breaks_the_engine_contract(copy: Path) -> None:
    sessions = copy / "core/mailbus/sessions/reader.py"
    sessions.write_text(sessions.read_text() + "\nimport mailbus_workbench.app\n")
    assert f"{ENGINE} BROKEN" in _broken(_lint(copy, copy / "contracts.toml"))


def test_a_codec_using_a_socket_breaks_the_sans_io_contract(copy: Path) -> None:
    protocol = copy / "core/mailbus/postoffice/protocol.py"
    protocol.write_text(protocol.read_text() + "\nimport socket\n")
    assert f"{SANS_IO} BROKEN" in _broken(_lint(copy, copy / "contracts.toml"))


def test_a_codec_reaching_a_clock_indirectly_breaks_the_sans_io_contract(copy: Path) -> None:
    helper = copy / "core/mailbus/names.py"
    helper.write_text(helper.read_text() + "\nfrom mailbus import polling\n")
    assert f"{SANS_IO} BROKEN" in _broken(_lint(copy, copy / "contracts.toml"))


def test_the_engine_naming_the_outbox_breaks_the_layers(copy: Path) -> None:
    context = copy / "core/mailbus/context.py"
    context.write_text(context.read_text() + "\nfrom mailbus.outbox import sender\n")
    assert f"{LAYERS}" in _broken(_lint(copy, copy / "contracts.toml"))
    assert (
        "mailbus.context is not allowed to import mailbus.outbox"
        in _lint(copy, copy / "contracts.toml").stdout
    )

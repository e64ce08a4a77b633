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
VIEWS = "Workbench layers: views are handed their data and never import the app"
FIXTURES = "The product never imports the test and documentation fixtures"
MODEL = "The workbench's model is plain Python: no terminal UI library"


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
    """The packages and the contracts, copied so that a test can break them."""
    for package in (
        "core/mailbus",
        "workbench/mailbus_workbench",
        "workbench/workbench_fixtures",
    ):
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
    assert "6 kept, 0 broken" in result.stdout


VIOLATIONS = [
    # (id, module changed in the copy, line added to it, what the report must say)
    (
        "core imports textual",
        "core/mailbus/registry.py",
        "from textual.app import App",
        [f"{ENGINE} BROKEN"],
    ),
    (
        "core imports the workbench",
        "core/mailbus/sessions/reader.py",
        "import mailbus_workbench.app",
        [f"{ENGINE} BROKEN"],
    ),
    (
        "a codec uses a socket",
        "core/mailbus/postoffice/protocol.py",
        "import socket",
        [f"{SANS_IO} BROKEN"],
    ),
    (
        "a codec reaches a clock indirectly",
        "core/mailbus/names.py",
        "from mailbus import polling",
        [f"{SANS_IO} BROKEN"],
    ),
    (
        "the engine names the outbox",
        "core/mailbus/context.py",
        "from mailbus.outbox import sender",
        [LAYERS, "mailbus.context is not allowed to import mailbus.outbox"],
    ),
    (
        "an entity names its context",
        "core/mailbus/subscription.py",
        "from mailbus.context import Context",
        [LAYERS, "mailbus.subscription -> mailbus.context"],
    ),
    (
        "a view looks the app up",
        "workbench/mailbus_workbench/views/topics.py",
        "from mailbus_workbench.app import WorkbenchApp",
        [VIEWS, "mailbus_workbench.views.topics -> mailbus_workbench.app"],
    ),
    (
        "the workbench imports the screenshot fixtures",
        "workbench/mailbus_workbench/app.py",
        "import workbench_fixtures.clock",
        [f"{FIXTURES}", "BROKEN", "mailbus_workbench.app -> workbench_fixtures.clock"],
    ),
    (
        "the workbench model draws",
        "workbench/mailbus_workbench/model/topics.py",
        "from rich.text import Text",
        [f"{MODEL} BROKEN"],
    ),
]


@pytest.mark.parametrize(
    ("module", "line", "reported"), [v[1:] for v in VIOLATIONS], ids=[v[0] for v in VIOLATIONS]
)
def test_a_deliberate_violation_is_reported(
    copy: Path, module: str, line: str, reported: list[str]
) -> None:
    changed = copy / module
    changed.write_text(changed.read_text() + f"\n{line}\n")
    report = _broken(_lint(copy, copy / "contracts.toml"))
    for text in reported:
        assert text in report

"""`mailbus notebook [--config FILE]`: JupyterLab opened on a live notebook attached to
the demo (or to the given system). The notebook is written once (`mailbus-live.ipynb`,
or `mailbus-<config>.ipynb`) and left as the user edits it afterwards."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

NEEDS = ("jupyterlab", "anywidget", "altair")
INSTALL = "pip install 'mailbus[notebook]'"


def missing_modules() -> list[str]:
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def _cell(kind: str, index: int, source: str) -> dict[str, object]:
    cell: dict[str, object] = {
        "cell_type": kind,
        "id": f"mailbus-{index}",
        "metadata": {},
        "source": source.splitlines(keepends=True),
    }
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def notebook_cells(config: Path | None) -> list[tuple[str, str]]:
    """(kind, source) of the live notebook's cells."""
    if config is None:
        attach = (
            "from mailbus.notebook import Monitor\n\n"
            "# The built-in demo, in this kernel; stop() ends both.\n"
            'monitor = Monitor.demo(fields=["robot/pose.x", "sensors/temperature.celsius"])\n'
            "monitor"
        )
        what = "the built-in demo (robot, sensors, a `demo/add` service)"
    else:
        attach = (
            "from mailbus.notebook import Monitor\n\n"
            f"CONFIG = {str(config)!r}\n"
            "# Name topics to subscribe to (their messages then arrive here): topics=[...]\n"
            "monitor = Monitor.from_options(CONFIG)\n"
            "monitor"
        )
        what = f"the system of `{config}`"
    cells = [
        (
            "markdown",
            f"# Mailbus live\n\nA monitor attached to {what}: the topic tree with counts, "
            "rates and a filter, the selected message (JSON, headers, raw), charts of "
            "the watched fields and of the rates, and the service calls. "
            "Run the cells with Shift+Enter.",
        ),
        ("code", attach),
        (
            "markdown",
            'Chart a field: `monitor.watch("topic.key")`. Publish or call from a cell; '
            "the results show the Message-IDs of the emails.",
        ),
    ]
    if config is None:
        cells += [
            ("code", 'monitor.call("demo/add", [1, 2, 3])'),
            ("code", 'monitor.publish("notes/hello", {"from": "a notebook"})'),
        ]
    else:
        cells += [
            (
                "markdown",
                "The whole workbench, served in this cell as `mailbus serve` serves it:",
            ),
            ("code", "import mailbus.notebook\n\nmailbus.notebook.workbench(CONFIG)"),
        ]
    cells.append(("code", "monitor.frame(last=10)"))
    return cells


def write_notebook(path: Path, config: Path | None) -> None:
    document = {
        "cells": [_cell(k, i, src) for i, (k, src) in enumerate(notebook_cells(config))],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(document, indent=1) + "\n", "utf-8")


def notebook_path(directory: Path, config: Path | None) -> Path:
    name = "mailbus-live.ipynb" if config is None else f"mailbus-{config.stem}.ipynb"
    return directory / name


ALLOW_ROOT = "--allow-root"
# JupyterLab defaults of our own (a user's settings still win): the notebook is saved 2 s
# after a change, not 120 s, so that a page reloaded soon after a cell drew the monitor
# finds its output in the file and draws it again from the kernel's live widget.
JUPYTER_DEFAULTS = Path(__file__).with_name("jupyter")


def jupyter_env(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with our JupyterLab defaults on Jupyter's configuration path."""
    path = [
        str(JUPYTER_DEFAULTS),
        *filter(None, environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep)),
    ]
    return {**environ, "JUPYTER_CONFIG_PATH": os.pathsep.join(path)}


def jupyter_command(path: Path, extra: Sequence[str], *, euid: int | None = None) -> list[str]:
    """JupyterLab's command line; as root (the usual user in a container) with
    `--allow-root`, which JupyterLab otherwise demands before it starts."""
    options = list(extra)
    if (os.geteuid() if euid is None else euid) == 0 and ALLOW_ROOT not in options:
        options.append(ALLOW_ROOT)
    return [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={path.parent}",
        *options,
        str(path),
    ]


def run_notebook(
    config: str | None, directory: str, extra: Sequence[str] = (), *, run: bool = True
) -> int:
    """The command's body: 2 with the reason on stderr if it cannot start; `run=False`
    writes the notebook only."""
    missing = missing_modules()
    if missing:
        print(
            f"mailbus notebook needs {', '.join(missing)} (the `notebook` extra): {INSTALL}",
            file=sys.stderr,
        )
        return 2
    options = None if config is None else Path(config).expanduser().absolute()
    if options is not None and not options.is_file():
        print(f"mailbus notebook: no such options file: {config}", file=sys.stderr)
        return 2
    where = Path(directory).expanduser().absolute()
    if not where.is_dir():
        print(f"mailbus notebook: no such directory: {directory}", file=sys.stderr)
        return 2
    path = notebook_path(where, options)
    if path.exists():
        print(f"opening {path} (as you left it)", flush=True)
    else:
        write_notebook(path, options)
        print(f"wrote {path}", flush=True)
    if run:
        # JupyterLab takes this process's place: Ctrl+C reaches it alone, and it shuts
        # its kernels down as it does when started by hand.
        command = jupyter_command(path, extra)
        os.execve(command[0], command, jupyter_env(os.environ))  # noqa: S606 (no shell)
    return 0

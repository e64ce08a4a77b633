"""How the Tests view runs a folder of tests: the `mailbus test` command line for the
system the workbench is attached to, and what pytest's exit status means.

The run is a child process with the folder as its working directory and pytest's root,
so that the node ids in its report are the ids to run a test again with.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# pytest's exit statuses (pytest.ExitCode), said for a person.
EXIT_MEANINGS = {
    0: "all passed",
    1: "some tests failed",
    2: "the run was interrupted or the tests could not be collected (an import or syntax "
    "error, or no such file): see the output below",
    3: "pytest failed inside (an internal error): see the output below",
    4: "pytest refused its command line (a usage error): see the output below",
    5: "no tests were collected: no test_*.py file with test_ functions in the folder",
}


@dataclass(frozen=True, slots=True)
class Target:
    """What the tests run against: the options file of the attached system, or none."""

    config_file: str | None
    note: str  # said in the view, so that a user knows what a green run means


def target_for(config_file: str | None, demo: bool) -> Target:
    if config_file:
        return Target(
            config_file, f"against the attached system: mailbus test --config {config_file}"
        )
    if demo:
        return Target(
            None,
            "the embedded demo lives inside this workbench, where no other process can "
            "reach it: each test runs on an in-process bus of its own, and a test saved "
            "here starts the demo's participants itself (system.start)",
        )
    return Target(None, "not attached to a system: the tests run on an in-process bus")


def run_command(
    target: Target, report: Path, node_ids: Sequence[str] = (), python: str = sys.executable
) -> list[str]:
    """`python -m mailbus test` on the folder (the working directory) or on the given
    tests of it, writing the JUnit XML report to `report`."""
    argv = [python, "-m", "mailbus", "test", "--junit-xml", str(report)]
    if target.config_file:
        argv += ["--config", target.config_file]
    return [*argv, *(node_ids or ["."]), "--", "--rootdir=.", "-p", "no:cacheprovider"]


def exit_meaning(status: int) -> str:
    if status < 0:
        return f"the run was stopped (signal {-status})"
    return EXIT_MEANINGS.get(status, f"pytest ended with status {status}")


def folder_problem(folder: Path) -> str:
    """Why the folder cannot be run, or "" when it can."""
    if not folder.exists():
        return (
            f"No folder {folder}: save a test here (t on a message in Topics or a call "
            "in Services) or type another folder above (e)"
        )
    if not folder.is_dir():
        return f"{folder} is not a folder: type a folder of test_*.py files above (e)"
    return ""

"""Shell completion as a shell asks for it: argcomplete's protocol (the command line in
COMP_LINE, the answers on file descriptor 8) against the real `mailbus` command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

MAILBUS = [sys.executable, "-m", "mailbus"]


def complete(line: str) -> list[str]:
    read, write = os.pipe()
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    # argcomplete writes its answers to fd 8 and its debug output to fd 9.
    with open(os.devnull, "w") as devnull:
        done = subprocess.run(
            MAILBUS,
            env=env,
            pass_fds=(8, 9),
            preexec_fn=lambda: (os.dup2(write, 8), os.dup2(devnull.fileno(), 9)),
            capture_output=True,
            timeout=60,
        )
    os.close(write)
    with os.fdopen(read) as answers:
        words = answers.read().split("\n")
    assert done.returncode == 0, done.stderr
    return [w.strip() for w in words if w.strip()]


def test_subcommands_and_options_complete() -> None:
    assert complete("mailbus topic e") == ["echo"]
    assert set(complete("mailbus ")) >= {"topic", "service", "participant", "completion"}
    assert "--where" in complete("mailbus topic echo x --wh")


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete "), ("zsh", "#compdef mailbus"), ("fish", "complete --command mailbus")],
)
def test_completion_prints_a_script_for_each_shell(shell: str, marker: str) -> None:
    done = subprocess.run([*MAILBUS, "completion", shell], capture_output=True, text=True)
    assert done.returncode == 0 and marker in done.stdout, done.stdout[-400:]


def test_an_unknown_shell_is_a_usage_error() -> None:
    done = subprocess.run([*MAILBUS, "completion", "csh"], capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice: 'csh'" in done.stderr

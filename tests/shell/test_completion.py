"""Shell completion as a shell asks for it: argcomplete's protocol (the command line in
COMP_LINE, the answers on file descriptor 8) against the real `mailbus` command."""

from __future__ import annotations

import os
import subprocess

import mailbus
import pytest
from mailbus.options import options_from_mapping

from shell.shell_system import MAILBUS, PASSWORD, System


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_topic_and_service_names_complete_from_the_running_system(
    shared_system: System,
) -> None:
    """Names come from what the system the command line names (--config) shows: here a
    participant that announces a publisher and a server."""
    options = options_from_mapping(
        {
            "transport": "postoffice",
            "announce-period-s": 0.2,
            "postoffice": {"port": shared_system.port, "box": "lab.names", "password": PASSWORD},
        }
    )
    config = str(shared_system.config("lab.completer"))
    with mailbus.Context(options) as ctx:
        entities = [ctx.publisher("lab/arm/pose"), ctx.publisher("lab/arm/speed")]
        for publisher in entities:
            publisher.publish("{}")
        server = ctx.server("lab/arm/home")
        assert complete(f"mailbus topic echo --config {config} lab/arm/") == [
            "lab/arm/pose",
            "lab/arm/speed",
        ]
        assert complete(f"mailbus service call --config {config} lab/") == ["lab/arm/home"]
        assert complete(f"mailbus topic hz --config {config} lab/arm/pose lab/arm/s") == [
            "lab/arm/speed"
        ]
        assert server.service == "lab/arm/home"  # kept alive until here
    assert complete("mailbus topic echo --demo robot/p") == ["robot/pose"]

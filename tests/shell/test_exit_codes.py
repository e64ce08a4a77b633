"""Exit codes and messages as docs/shell.md's table has them: 1 when nothing arrived
within --seconds (saying so), 2 for what the user typed or configured (a refused
password included, without the dead-server hint), and `service call --demo` answered
every time."""

from __future__ import annotations

import os
import subprocess

import pytest
from mailbus.postoffice.client import PostOfficeClient

from shell.shell_system import MAILBUS, WAIT_S, System, run_many


@pytest.mark.slow
def test_hz_bw_and_delay_say_that_nothing_came(shared_system: System) -> None:
    for action in ("hz", "bw", "delay"):
        done = shared_system.run("lab.quiet", "topic", action, "lab/none", "--seconds", "2")
        assert done.returncode == 1, (action, done.stderr)
        assert done.stdout == ""
        assert done.stderr.strip().endswith("no message on lab/none within 2 s"), done.stderr


@pytest.mark.slow
def test_service_echo_on_a_service_nobody_calls_says_so(shared_system: System) -> None:
    done = shared_system.run("lab.quiet", "service", "echo", "lab/nobody", "--seconds", "2")
    assert done.returncode == 1 and done.stdout == ""
    assert "no call of lab/nobody within 2 s" in done.stderr


@pytest.mark.slow
def test_a_field_no_message_has_is_no_null(shared_system: System) -> None:
    done = subprocess.run(
        [*MAILBUS, "topic", "echo", "robot/pose", "--demo", "--field", "nofield", "--seconds", "2"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "a message on robot/pose has no field nofield (skipped)" in done.stderr
    assert "no message on robot/pose with field nofield within 2 s" in done.stderr


def test_a_refused_password_is_no_dead_server(shared_system: System) -> None:
    with PostOfficeClient("127.0.0.1", shared_system.port) as po:
        po.create_box("lab.locked", "another-password-entirely")
    env = {**os.environ, "MAILBUS_POSTOFFICE_BOX": "lab.locked"}
    for backlog in ((), ("--backlog",)):
        done = shared_system.run(
            "lab.tool", "topic", "echo", "lab/t", "--seconds", "2", *backlog, env=env
        )
        assert done.returncode == 2, done.stderr
        assert "refused the password for box 'lab.locked'" in done.stderr
        assert "is the server running" not in done.stderr and "Traceback" not in done.stderr
    assert "lab.locked" in shared_system.boxes()  # not ours: left alone


def test_an_invalid_name_is_a_usage_error_not_a_connection_error(shared_system: System) -> None:
    for command in (("topic", "pub", "lab/\tx", "{}"), ("service", "call", " lab/x", "{}")):
        done = shared_system.run("lab.tool", *command)
        assert done.returncode == 2, done.stderr
        assert "is the server running" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_service_call_on_the_demo_waits_for_its_server() -> None:
    """The demo's server starts on a thread of the command: under load the call came
    first about 1 run in 12. Sixteen at once are all answered."""
    results = run_many(
        [
            ["service", "call", "--demo", "demo/add", f"[{n}, 1]", "--timeout", "20"]
            for n in range(16)
        ]
    )
    assert [(r["code"], r["stdout"].strip()) for r in results] == [
        (0, f'{{"sum": {n + 1}}}') for n in range(16)
    ], [r["stderr"] for r in results]

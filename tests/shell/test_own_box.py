"""On PostOffice each shell command reads through a box of its own, made in the
configured box's group and removed on exit: two commands on one options file work at
once, and none shows letters that waited from before it started, unless asked
(`MAILBUS_POSTOFFICE_BOX` names a fixed box; `--backlog` shows what waits there)."""

from __future__ import annotations

import json
import os

import mailbus
import pytest
from mailbus.postoffice.client import PostOfficeClient
from waiting import eventually

from shell.shell_system import PASSWORD, WAIT_S, System


def publish(system: System, topic: str, body: str) -> None:
    with mailbus.Context(system.options("lab.sender")) as ctx:
        ctx.publisher(topic).publish(body)
        assert ctx.sender.flush(WAIT_S)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_two_commands_on_one_options_file_at_once(shared_system: System) -> None:
    echoes = [
        shared_system.start("lab.same", "topic", "echo", "lab/two", "--count", "1", "--json")
        for _ in range(2)
    ]
    eventually(lambda: len(shared_system.own_boxes("lab.same")) == 2, WAIT_S, "two boxes")
    publish(shared_system, "lab/two", '{"n": 2}')
    for echo in echoes:
        out, err = echo.communicate(timeout=WAIT_S)
        assert echo.returncode == 0, err
        assert [json.loads(line)["body"] for line in out.splitlines()] == ['{"n": 2}']
    assert shared_system.own_boxes("lab.same") == []  # removed on exit
    assert "lab.same" not in shared_system.boxes()


@pytest.mark.slow
def test_letters_from_before_the_command_are_not_shown(shared_system: System) -> None:
    with PostOfficeClient("127.0.0.1", shared_system.port) as po:
        po.create_box("lab.stale", PASSWORD)  # left behind, say, by an earlier run
    publish(shared_system, "lab/old", '{"age": "old"}')
    assert shared_system.letters_in("lab.stale") == 1
    done = shared_system.run("lab.stale", "topic", "echo", "lab/old", "--seconds", "2")
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert shared_system.letters_in("lab.stale") == 1  # not the command's: untouched

    # MAILBUS_POSTOFFICE_BOX reads that box: emptied first, unless --backlog.
    env = {**os.environ, "MAILBUS_POSTOFFICE_BOX": "lab.stale"}
    done = shared_system.run("lab.x", "topic", "echo", "lab/old", "--seconds", "2", env=env)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    publish(shared_system, "lab/old", '{"age": "older"}')
    kept = shared_system.run(
        "lab.x", "topic", "echo", "lab/old", "--backlog", "--once", "--json", env=env
    )
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["body"] == '{"age": "older"}'
    assert "lab.stale" in shared_system.boxes()  # it was there before: it stays

"""A participant that closes cleanly removes the boxes it created for itself (unless told
to keep them) and leaves alone the boxes that existed before it: in one process, and a
one-shot `mailbus record --seconds 1` in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mailbus
import pytest
from mailbus.postoffice.store import list_mailboxes
from mailbus.postoffice.transport import PASSWORD_ENV

from .conftest import REPO, Daemon
from .test_po_transport import options


def names(daemon: Daemon) -> set[str]:
    return set(daemon.thread.call(lambda: list(daemon.office.boxes)))


def test_a_participant_removes_the_boxes_it_created(daemon: Daemon) -> None:
    with daemon.client() as other:
        other.create_box("clean.stay", "pw")
    with mailbus.Context(options(daemon.port, "clean.me")) as ctx:
        ctx.publisher("t").publish("to the group: clean.stay gets it")
        assert {"clean.me", "clean.me.out", "clean.stay"} <= names(daemon)
    assert names(daemon) == {"clean.stay"}  # gone before shutdown returned
    assert {b.name for b in list_mailboxes(daemon.config.store_path)} == {"clean.stay"}
    removed = [e for e in daemon.events if e.kind == "postoffice.box_removed"]
    assert sorted(e.name for e in removed) == ["clean.me", "clean.me.out"]


def test_boxes_that_existed_before_are_left_alone(daemon: Daemon) -> None:
    with daemon.client() as admin:
        admin.create_box("before.me", "pw")
        admin.create_box("before.me.out", "pw")
    with mailbus.Context(options(daemon.port, "before.me")):
        pass
    assert {"before.me", "before.me.out"} <= names(daemon)


def test_keep_boxes_keeps_them(daemon: Daemon) -> None:
    with mailbus.Context(options(daemon.port, "keep.me", **{"keep-boxes": True})) as ctx:
        ctx.publisher("t").publish("x")
    assert {"keep.me", "keep.me.out"} <= names(daemon)
    assert "postoffice.box_removed" not in daemon.kinds()


@pytest.mark.slow
def test_a_one_shot_record_leaves_no_box_behind(daemon: Daemon, tmp_path: Path) -> None:
    config = tmp_path / "po.toml"
    config.write_text(
        f'transport = "postoffice"\n[postoffice]\nport = {daemon.port}\nbox = "lab.record"\n'
    )
    with daemon.client() as peer:  # another member of the group, publishing meanwhile
        peer.create_box("lab.peer", "pw")
    env = {**os.environ, PASSWORD_ENV: "record-pw", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mailbus",
            "--config",
            str(config),
            "record",
            str(tmp_path / "session"),
            "--seconds",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    created = {e.name for e in daemon.events if e.kind == "postoffice.box_created"}
    assert {"lab.record", "lab.record.out"} <= created  # it did run on the daemon
    assert names(daemon) == {"lab.peer"}

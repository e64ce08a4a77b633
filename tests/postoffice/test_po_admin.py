"""Looking after mailboxes from outside the protocol: `mailbus postoffice boxes` and
`mailbus postoffice box NAME --show/--empty/--remove`, through a running daemon's admin
socket and, with no daemon, on the store file; garbage on the admin socket."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from mailbus.cli import main
from mailbus.postoffice.admin import (
    AdminError,
    admin_path,
    empty_box,
    list_boxes,
    remove_box,
    show_letters,
)
from mailbus.postoffice.store import list_mailboxes

from .conftest import Daemon


def letter(subject: str) -> bytes:
    return f"Subject: {subject}\r\nFrom: a@b\r\n\r\nbody of {subject}\r\n".encode()


def fill(daemon: Daemon, box: str, count: int) -> None:
    with daemon.client() as sender:
        sender.create_box(box, "pw")
        sender.create_box(box + ".sender", "pw")
        sender.check_out(box + ".sender", "pw")
        for n in range(count):
            sender.send(box, letter(f"note {n}"))


def cli(*args: str) -> int:
    return main(["postoffice", *args])


def test_list_show_empty_and_remove_through_the_daemon(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    store = daemon.config.store_path
    fill(daemon, "lab.full", 3)
    infos = {b.name: b for b in list_boxes(store)}
    assert infos["lab.full"].letters == 3 and infos["lab.full"].live
    shown = show_letters(store, "lab.full", limit=2)
    assert [x.subject for x in shown] == ["note 0", "note 1"]  # oldest first, bounded
    assert cli("box", "lab.full", "--show", "--store", str(store)) == 0
    out = capsys.readouterr().out
    assert "note 2" in out and "3 letters shown" in out
    assert cli("box", "lab.full", "--empty", "--yes", "--store", str(store)) == 0
    assert "emptied lab.full (3 letters deleted)" in capsys.readouterr().out
    daemon.wait_for(lambda: len(daemon.office.boxes["lab.full"].letters) == 0)
    assert "postoffice.box_emptied" in daemon.kinds()
    assert cli("box", "lab.full", "--remove", "--yes", "--store", str(store)) == 0
    daemon.wait_for(lambda: "lab.full" not in daemon.office.boxes)
    assert "lab.full" not in {b.name for b in list_mailboxes(store)}


def test_nothing_changes_without_confirmation(
    daemon: Daemon, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = daemon.config.store_path
    fill(daemon, "lab.keep", 2)
    # Not a terminal: nobody to ask, so it refuses instead of guessing.
    assert cli("box", "lab.keep", "--remove", "--store", str(store)) == 1
    assert "without --yes" in capsys.readouterr().err
    # A terminal that answers no.
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda _prompt: "n")
    assert cli("boxes", "--empty", "lab.keep", "--store", str(store)) == 1
    assert "nothing done" in capsys.readouterr().out
    assert {b.name: b.letters for b in list_mailboxes(store)}["lab.keep"] == 2


def test_a_checked_out_box_is_not_removed_and_bad_names_are_refused(daemon: Daemon) -> None:
    store = daemon.config.store_path
    with daemon.client() as holder:
        holder.create_box("lab.busy", "pw")
        holder.check_out("lab.busy", "pw")
        with pytest.raises(AdminError):
            remove_box(store, "lab.busy")
    with pytest.raises(AdminError, match="no mailbox"):
        empty_box(store, "lab.nobody")
    for bad in ("../etc", "a b", "", "x" * 5000):
        with pytest.raises((AdminError, ValueError)):
            show_letters(store, bad)


def test_without_a_daemon_the_store_is_changed_directly(
    make_daemon,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    daemon = make_daemon()
    store = daemon.config.store_path
    fill(daemon, "lab.offline", 4)
    daemon.thread.stop()
    assert not admin_path(store).exists() or not list_boxes(store)[0].live
    assert empty_box(store, "lab.offline") == 4
    assert {b.name: b.letters for b in list_mailboxes(store)}["lab.offline"] == 0
    assert remove_box(store, "lab.offline") == 0
    assert "lab.offline" not in {b.name for b in list_mailboxes(store)}


def test_garbage_on_the_admin_socket_gets_an_error_and_the_daemon_goes_on(daemon: Daemon) -> None:
    path = admin_path(daemon.config.store_path)
    assert path.exists() and (path.stat().st_mode & 0o077) == 0  # the owner only
    for garbage in (b"\x00\xff not json\n", b'{"op": "format-disk"}\n', b"[1, 2]\n"):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(path))
            sock.sendall(garbage)
            answer = json.loads(sock.makefile("rb").readline())
        assert answer["ok"] is False and answer["error"]
    assert "lab.alive" not in {b.name for b in list_boxes(daemon.config.store_path)}
    fill(daemon, "lab.alive", 1)  # the daemon still serves, and its admin socket too
    assert {b.name: b.letters for b in list_boxes(daemon.config.store_path)}["lab.alive"] == 1

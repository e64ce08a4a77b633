"""The daemon as a real process: killed with SIGKILL while letters wait, restarted on
the same store, nothing acknowledged is lost; the command line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from mailbus.postoffice.client import NotAuthorized, ServerShutdown

from .conftest import REPO, DaemonProcess


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["full", "normal"])
def test_sigkill_with_letters_waiting_loses_nothing(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path, sync: str
) -> None:
    store = tmp_path / f"store-{sync}" / "po.db"
    first = spawn_daemon("--sync", sync, store=store)
    sender = first.client()
    sender.create_box("crash.sender", "pw")
    sender.create_box("crash.receiver", "pw2")
    sender.check_out("crash.sender", "pw")
    payloads = [f"letter {i} é".encode() for i in range(200)]
    for payload in payloads:
        sender.send("crash.receiver", payload)  # acknowledged: must survive
    receiver = first.client()
    receiver.check_out("crash.receiver", "pw2")
    taken = []
    for letter in receiver.get_mail(5.0):
        taken.append(letter.payload)
        if len(taken) == 50:
            break  # SATIATED: these 50 are gone for good
    first.kill()  # SIGKILL: no shutdown, no flush
    assert first.proc.returncode == -9

    second = spawn_daemon("--sync", sync, store=store)
    with second.client() as again:
        with pytest.raises(NotAuthorized):
            again.check_out("crash.receiver", "wrong")  # passwords survived too
        again.check_out("crash.receiver", "pw2")
        rest = [letter.payload for letter in again.get_mail(0)]
    assert taken == payloads[:50]
    assert rest == payloads[50:]
    second.terminate()


def test_sigterm_says_shutdown_and_exits_cleanly(
    spawn_daemon: Callable[..., DaemonProcess],
) -> None:
    proc = spawn_daemon()
    client = proc.client()
    client.create_box("term.me", "pw")
    assert proc.terminate() == 0
    with pytest.raises(ServerShutdown):
        client.check_out("term.me", "pw")


def test_cli_lists_mailboxes_with_letter_counts(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    store = tmp_path / "cli" / "po.db"
    proc = spawn_daemon("--max-letters-per-box", "3", store=store)
    with proc.client() as client:
        client.create_box("list.a", "pw")
        client.create_box("list.b", "pw")
        client.check_out("list.a", "pw")
        for _ in range(4):
            client.send("list.b", b"12345")  # the fourth drops the first
        out = subprocess.run(
            [sys.executable, "-m", "mailbus", "postoffice", "boxes", "--store", str(store)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            check=True,
        ).stdout.split("\n")
    assert out[0].split() == ["MAILBOX", "LETTERS", "BYTES", "DROPPED", "STATE"]
    rows = {line.split()[0]: line.split()[1:] for line in out[1:] if line.strip()}
    assert rows["list.a"][:5] == ["0", "0", "0", "held", "by"]  # live state from the daemon
    assert rows["list.b"][:4] == ["3", "15", "1", "idle"]
    proc.terminate()


def serve_once(store: Path) -> subprocess.CompletedProcess[str]:
    """`mailbus postoffice serve` on `store`, expected to refuse and exit."""
    command = [sys.executable, "-m", "mailbus", "postoffice", "serve", "--port", "0"]
    return subprocess.run(
        [*command, "--store", str(store)], capture_output=True, text=True, timeout=60, cwd=REPO
    )


def test_cli_refuses_a_corrupt_store(tmp_path: Path) -> None:
    store = tmp_path / "bad.db"
    store.write_bytes(b"garbage" * 1000)
    result = serve_once(store)
    assert result.returncode == 1
    assert "not a usable PostOffice store" in result.stderr


def test_cli_trace_log_records_events_without_passwords(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    import json

    log = tmp_path / "trace.jsonl"
    proc = spawn_daemon("--trace-log", str(log))
    with proc.client() as client:
        client.create_box("trace.me", "Sekr1t-pw")
        with pytest.raises(NotAuthorized):
            client.check_out("trace.me", "Wr0ng-pw")
        client.check_out("trace.me", "Sekr1t-pw")
        client.send("trace.me", b"hi")
        assert [x.payload for x in client.get_mail(0)] == [b"hi"]
    assert proc.terminate() == 0
    text = log.read_text()
    kinds = [json.loads(line)["kind"] for line in text.splitlines()]
    for kind in (
        "postoffice.box_created",
        "postoffice.auth_failed",
        "postoffice.checked_out",
        "postoffice.letter_in",
        "postoffice.letter_out",
        "postoffice.returned",
    ):
        assert kind in kinds
    assert "Sekr1t" not in text and "Wr0ng" not in text


def test_a_second_daemon_on_the_same_store_is_refused(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    store = tmp_path / "shared" / "po.db"
    spawn_daemon(store=store)
    result = serve_once(store)
    assert result.returncode == 1
    assert "in use by another PostOffice daemon" in result.stderr

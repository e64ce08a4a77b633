"""`mailbus queue` run as a real command (python -m mailbus)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mailbus.outbox import OutboxSender
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.storage import Destination, Entry, Metadata, Schedule
from outbox_support import RecordingSender


def mailbus(*args: str, env_dir: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILBUS_")}
    if env_dir is not None:
        env["MAILBUS_OUTBOX_DIR"] = env_dir
    return subprocess.run(
        [sys.executable, "-m", "mailbus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def add(storage: FsStorage, n: int, attempts: int = 0) -> Entry:
    data = f"Message-ID: <cli{n}@x>\r\nSubject: cli\r\n\r\nbody {n}\r\n".encode()
    enq = storage.enqueue()
    enq.write(data)
    meta = Metadata(f"<cli{n}@x>", "s@x.org", (f"r{n}@y.org",), "cli", len(data), 1)
    (entry,) = enq.commit([Destination(meta, Schedule(attempts, 2**62, 0, "err" * attempts))])
    return entry


@pytest.fixture
def filled(outbox_dir: Path) -> dict[str, Entry]:
    storage = FsStorage(outbox_dir)
    queued = add(storage, 1)
    dead = storage.dead_letter(storage.send_start(add(storage, 2, attempts=3)))
    (outbox_dir / "corrupt" / "queue.junk").write_text("junk")
    return {"queued": queued, "dead": dead}


def test_list_json_has_the_queue_view_fields(outbox_dir: Path, filled: dict[str, Entry]) -> None:
    done = mailbus("queue", "list", "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    items = {i["id"]: i for i in json.loads(done.stdout)}
    queued, dead = items[filled["queued"].id], items[filled["dead"].id]
    assert queued["state"] == "queued" and dead["state"] == "dead"
    assert queued["destination"] == "r1@y.org"
    assert dead["attempts"] == 3 and dead["last_error"] == "errerrerr"
    assert queued["size"] == filled["queued"].metadata.size
    assert queued["next_attempt_ns"] == 2**62
    assert queued["age_s"] > 0
    assert items["queue.junk"]["state"] == "corrupt"


def test_list_plain_uses_the_directory_from_the_environment(
    outbox_dir: Path, filled: dict[str, Entry]
) -> None:
    done = mailbus("queue", "list", env_dir=str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert filled["queued"].id in done.stdout and "dead" in done.stdout
    assert done.stdout.strip().endswith("3 entries")


def test_show_prints_the_entry_and_its_email(outbox_dir: Path, filled: dict[str, Entry]) -> None:
    done = mailbus("queue", "show", filled["queued"].id, "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["message_id"] == "<cli1@x>"
    assert "body 1" in shown["contents"]
    missing = mailbus("queue", "show", "nope", "--json", "--dir", str(outbox_dir))
    assert missing.returncode == 1
    assert "no queued, in-flight or dead entry 'nope'" in json.loads(missing.stdout)["error"]


def test_retry_revives_dead_mail_and_makes_it_due(
    outbox_dir: Path, filled: dict[str, Entry]
) -> None:
    done = mailbus("queue", "retry", "--all", "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["retried"]) == sorted(e.id for e in filled.values())
    storage = FsStorage(outbox_dir)
    queue = storage.list_queue().entries
    assert len(queue) == 2 and storage.list_dead().entries == ()
    assert all(e.schedule.next_attempt_ns < 2**62 for e in queue)
    # And a sender now delivers both at once.
    recorder = RecordingSender()
    sender = OutboxSender(recorder, outbox_dir)
    try:
        assert sender.wait_idle(5.0)
    finally:
        sender.close()
    assert sorted(e.message_id for e in recorder.sent) == ["<cli1@x>", "<cli2@x>"]


def test_purge_removes_entries_and_their_data(outbox_dir: Path, filled: dict[str, Entry]) -> None:
    done = mailbus("queue", "purge", "--dead", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert "purged 1 entries" in done.stdout
    assert [i.state for i in [*FsStorage(outbox_dir).list_dead().entries]] == []
    done = mailbus("queue", "purge", "--all", "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["purged"]) == sorted([filled["queued"].id, "queue.junk"])
    assert os.listdir(outbox_dir / "data") == []
    assert os.listdir(outbox_dir / "corrupt") == []


def test_changes_are_refused_while_a_holder_that_takes_no_requests_has_the_outbox(
    outbox_dir: Path, filled: dict[str, Entry]
) -> None:
    # Not started: no delivery thread to carry out requests (test_outbox_control.py has
    # the running sender).
    sender = OutboxSender(RecordingSender(), outbox_dir, start=False)
    try:
        done = mailbus("queue", "purge", "--all", "--dir", str(outbox_dir))
        assert done.returncode == 1
        assert f"in use by process {os.getpid()}" in done.stderr
        assert "which does not take retry/purge requests" in done.stderr
        # Reading needs no lock.
        assert mailbus("queue", "list", "--dir", str(outbox_dir)).returncode == 0
    finally:
        sender.close()
    assert len(FsStorage(outbox_dir).list_queue().entries) == 1


def test_usage_errors_are_clear(tmp_path: Path) -> None:
    done = mailbus("queue", "list")
    assert done.returncode == 1 and "no outbox directory" in done.stderr
    done = mailbus("queue", "list", "--dir", str(tmp_path))
    assert done.returncode == 1 and "is not an outbox" in done.stderr
    done = mailbus("queue", "retry", "--dir", str(tmp_path))
    assert done.returncode == 1 and "name entry ids or use --all" in done.stderr


def test_the_directory_can_come_from_the_options_file(
    outbox_dir: Path, filled: dict[str, Entry], tmp_path: Path
) -> None:
    config = tmp_path / "mailbus.toml"
    config.write_text(f'[outbox]\ndir = "{outbox_dir}"\n', encoding="utf-8")
    done = mailbus("--config", str(config), "queue", "list", "--json")
    assert done.returncode == 0, done.stderr
    assert {i["id"] for i in json.loads(done.stdout)} >= {e.id for e in filled.values()}

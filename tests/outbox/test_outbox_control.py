"""`mailbus queue retry/purge` while a sender process runs and holds the outbox: the
request goes through control/ and the sender's delivery thread carries it out."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus.outbox import OutboxLockedError, OutboxSender, admin, control
from mailbus.outbox.control import ControlError, ControlRequest, ControlTimeoutError
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.storage import Destination, Entry, Metadata, Schedule
from outbox_support import RecordingSender
from test_outbox_cli import mailbus
from waiting import eventually

HERE = Path(__file__).parent
SENDER_CHILD = HERE / "outbox_control_child.py"
HOLDER_CHILD = HERE / "outbox_holder_child.py"
WAIT_S = 20.0  # generous bound for a busy 2-core machine; never a sleep


class Child:
    """A child process whose stdout lines (JSON or plain) are read by a thread, so that
    the test can wait for one with a deadline."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, match: Callable[[Any], bool], what: str, timeout: float = WAIT_S) -> Any:
        """The next line that `match`es (lines passed over are kept in `seen`)."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {what} within {timeout} s; saw {self.seen}") from None
            if line is None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"child ended before {what}; saw {self.seen}; {err}")
            self.seen.append(line)
            if match(line):
                return line

    def stop(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(WAIT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


def attempt_of(message_id: str) -> Callable[[Any], bool]:
    return lambda line: isinstance(line, dict) and line.get("attempt") == message_id


@pytest.fixture
def running(outbox_dir: Path, tmp_path: Path) -> Iterator[tuple[Child, dict[str, str], Path]]:
    """A sender process with two mails queued after one failed attempt each."""
    down = tmp_path / "down"
    down.touch()
    child = Child(str(SENDER_CHILD), str(outbox_dir), str(down), "2", "30")
    try:
        ready = child.expect(lambda line: isinstance(line, dict) and "ready" in line, "ready")
        assert ready["ready"] and len(ready["ids"]) == 2
        yield child, ready["ids"], down
    finally:
        child.stop()


def queued(outbox_dir: Path) -> dict[str, Entry]:
    return {e.id: e for e in FsStorage(outbox_dir, create=False).list_queue().entries}


@pytest.mark.slow
def test_retry_all_while_the_sender_backs_off_is_attempted_at_once(
    outbox_dir: Path, running: tuple[Child, dict[str, str], Path]
) -> None:
    child, ids, down = running
    before = {entry_id: e.schedule.attempts for entry_id, e in queued(outbox_dir).items()}
    # The outage cost one probe, not one attempt per mail (the other may not be tried).
    assert sorted(before.values()) in ([0, 1], [1, 1])
    done = mailbus("queue", "retry", "--all", "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["retried"]) == sorted(ids)
    # Both are attempted now, not in 600 s.
    for message_id in ids.values():
        child.expect(attempt_of(message_id), f"an attempt of {message_id} now")
    eventually(
        lambda: (
            {i: e.schedule.attempts for i, e in queued(outbox_dir).items()}
            == {i: n + 1 for i, n in before.items()}
        ),
        WAIT_S,
    )
    # The server is back: retrying one id delivers it, and only it.
    down.unlink()
    first, second = sorted(ids)
    done = mailbus("queue", "retry", first, "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert "retried 1 entries" in done.stdout
    line = child.expect(attempt_of(ids[first]), "the delivery")
    assert line["ok"] is True
    eventually(lambda: list(queued(outbox_dir)) == [second], WAIT_S)
    assert child.stop() == 0
    assert not [line for line in child.seen if line == {"attempt": ids[second], "ok": True}]
    assert os.listdir(outbox_dir / "control") == []


@pytest.mark.slow
def test_purge_while_the_sender_runs_removes_the_entry(
    outbox_dir: Path, running: tuple[Child, dict[str, str], Path]
) -> None:
    child, ids, down = running
    first, second = sorted(ids)
    mark = len(child.seen)
    done = mailbus("queue", "purge", first, "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"purged": [first]}
    assert list(queued(outbox_dir)) == [second]
    mails = os.listdir(outbox_dir / "data")
    assert len(mails) == 1
    # The sender forgot it: retrying everything now attempts only the other one.
    down.unlink()
    done = mailbus("queue", "retry", "--all", "--json", "--dir", str(outbox_dir))
    assert json.loads(done.stdout) == {"retried": [second]}
    child.expect(attempt_of(ids[second]), "the delivery of the other mail")
    eventually(lambda: os.listdir(outbox_dir / "data") == [], WAIT_S)
    assert child.stop() == 0
    assert not [line for line in child.seen[mark:] if line.get("attempt") == ids[first]]


@pytest.mark.slow
def test_dead_mail_is_revived_and_purged_through_the_sender(
    outbox_dir: Path, tmp_path: Path
) -> None:
    down = tmp_path / "down"
    down.touch()
    child = Child(str(SENDER_CHILD), str(outbox_dir), str(down), "1", "1")  # 1 attempt: dead
    try:
        ready = child.expect(lambda line: isinstance(line, dict) and "ready" in line, "ready")
        ((entry_id, message_id),) = ready["ids"].items()
        storage = FsStorage(outbox_dir, create=False)
        assert [e.id for e in storage.list_dead().entries] == [entry_id]
        done = mailbus("queue", "retry", entry_id, "--dir", str(outbox_dir))
        assert done.returncode == 0, done.stderr
        child.expect(attempt_of(message_id), "the attempt of the revived mail")
        # It failed again and is dead again (max-attempts 1), with 2 attempts recorded.
        eventually(
            lambda: [e.schedule.attempts for e in storage.list_dead().entries] == [2], WAIT_S
        )
        done = mailbus("queue", "purge", "--dead", "--json", "--dir", str(outbox_dir))
        assert json.loads(done.stdout) == {"purged": [entry_id]}
        assert storage.list_dead().entries == () and os.listdir(outbox_dir / "data") == []
    finally:
        assert child.stop() == 0


@pytest.mark.slow
def test_garbage_in_control_is_set_aside_and_the_sender_keeps_serving(
    outbox_dir: Path, running: tuple[Child, dict[str, str], Path]
) -> None:
    child, ids, _ = running
    directory = outbox_dir / "control"
    bad_id = "0f0f0f0f-0000-4000-8000-000000000001"
    evil_id = "0f0f0f0f-0000-4000-8000-000000000002"
    (directory / "junk.txt").write_bytes(b"\x00\xff not a request")
    (directory / f"{bad_id}.request").write_bytes(b'{"version": 1, "action": "retry", "ids": [')
    secret = outbox_dir.parent / "secret"
    secret.write_text('{"version": 1, "action": "purge", "select": ["all"]}')
    os.symlink(secret, directory / f"{evil_id}.request")  # never followed
    # The request with a readable id gets an answer saying why it was refused.
    eventually(lambda: (directory / f"{bad_id}.result").exists(), WAIT_S)
    result = control.take_result(outbox_dir, bad_id)
    assert result is not None and result.done == ()
    assert result.error.startswith("request refused: bad request: unreadable request")
    eventually(lambda: (directory / f"{evil_id}.result").exists(), WAIT_S)
    evil = control.take_result(outbox_dir, evil_id)
    assert evil is not None and "refused" in evil.error
    eventually(lambda: sorted(os.listdir(directory)) == [], WAIT_S)
    aside = sorted(os.listdir(outbox_dir / "corrupt"))
    assert aside == sorted(
        [f"control.{bad_id}.taken", f"control.{evil_id}.taken", "control.junk.txt"]
    )
    assert len(queued(outbox_dir)) == 2  # the symlinked "purge all" did nothing
    assert secret.exists()
    # Still running and serving; and the set-aside files show in the listing.
    done = mailbus("queue", "retry", "--all", "--json", "--dir", str(outbox_dir))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["retried"]) == sorted(ids)
    listing = mailbus("queue", "list", "--json", "--dir", str(outbox_dir))
    corrupt = {i["id"] for i in json.loads(listing.stdout) if i["state"] == "corrupt"}
    assert corrupt == set(aside)
    done = mailbus("queue", "purge", "--corrupt", "--json", "--dir", str(outbox_dir))
    assert sorted(json.loads(done.stdout)["purged"]) == sorted(aside)
    assert os.listdir(outbox_dir / "corrupt") == [] and secret.exists()
    assert child.proc.poll() is None


def add(storage: FsStorage, n: int) -> Entry:
    data = f"Message-ID: <c{n}@x>\r\nSubject: c\r\n\r\nbody {n}\r\n".encode()
    enq = storage.enqueue()
    enq.write(data)
    meta = Metadata(f"<c{n}@x>", "s@x.org", ("r@y.org",), "c", len(data), 1)
    (entry,) = enq.commit([Destination(meta, Schedule(1, 2**62, 0, "earlier"))])
    return entry


@pytest.fixture
def one_entry(outbox_dir: Path) -> Entry:
    return add(FsStorage(outbox_dir), 1)


@pytest.fixture
def holder(outbox_dir: Path, one_entry: Entry, request: pytest.FixtureRequest) -> Iterator[Child]:
    child = Child(str(HOLDER_CHILD), str(outbox_dir), request.param)
    try:
        child.expect(lambda line: line == "held", "the lock")
        yield child
    finally:
        child.stop()


@pytest.mark.parametrize("holder", ["silent"], indirect=True)
def test_a_sender_that_never_answers_gives_a_clear_timeout_and_nothing_changes(
    outbox_dir: Path, one_entry: Entry, holder: Child
) -> None:
    done = mailbus("queue", "retry", "--all", "--timeout", "0.5", "--dir", str(outbox_dir))
    assert done.returncode == 1
    assert f"(process {holder.proc.pid}) did not answer within 0.5 s" in done.stderr
    assert "the request was withdrawn and nothing was changed" in done.stderr
    assert os.listdir(outbox_dir / "control") == []
    assert queued(outbox_dir)[one_entry.id].schedule.next_attempt_ns == 2**62


@pytest.mark.slow
@pytest.mark.parametrize("holder", ["claim"], indirect=True)
def test_a_sender_that_claims_but_does_not_answer_is_reported_as_such(
    outbox_dir: Path, one_entry: Entry, holder: Child
) -> None:
    with pytest.raises(ControlTimeoutError, match="took the request but did not answer"):
        admin.run(outbox_dir, ControlRequest("purge", (one_entry.id,)), timeout=3.0)
    holder.expect(lambda line: isinstance(line, dict) and "claimed" in line, "the claim")


@pytest.mark.parametrize("holder", ["claim-exit"], indirect=True)
def test_a_sender_that_dies_while_applying_is_reported_as_such(
    outbox_dir: Path, one_entry: Entry, holder: Child
) -> None:
    with pytest.raises(ControlError, match="stopped while carrying out the request"):
        admin.run(outbox_dir, ControlRequest("purge", (one_entry.id,)), timeout=60.0)
    assert holder.proc.wait(WAIT_S) == 0
    assert os.listdir(outbox_dir / "control") == []  # the dead claim is cleared


def test_a_holder_that_serves_no_control_is_refused_at_once(
    outbox_dir: Path, one_entry: Entry
) -> None:
    sender = OutboxSender(RecordingSender(), outbox_dir, start=False)  # no delivery thread
    try:
        with pytest.raises(OutboxLockedError, match="does not take retry/purge requests"):
            admin.run(outbox_dir, ControlRequest("retry", (one_entry.id,)), timeout=60.0)
        assert os.listdir(outbox_dir / "control") == []
    finally:
        sender.close()


def test_when_the_sender_stops_before_answering_admin_does_it_itself(
    outbox_dir: Path, one_entry: Entry
) -> None:
    child = Child(str(HOLDER_CHILD), str(outbox_dir), "silent")
    try:
        child.expect(lambda line: line == "held", "the lock")
        outcome: list[object] = []
        worker = threading.Thread(
            target=lambda: outcome.append(
                admin.run(outbox_dir, ControlRequest("purge", (one_entry.id,)), timeout=60.0)
            )
        )
        worker.start()
        control_dir = outbox_dir / "control"
        eventually(lambda: control_dir.is_dir() and len(os.listdir(control_dir)) == 1, WAIT_S)
        assert child.stop() == 0  # releases the lock without answering
        worker.join(WAIT_S)
        assert outcome == [[one_entry.id]]
        assert queued(outbox_dir) == {} and os.listdir(outbox_dir / "control") == []
    finally:
        child.stop()


def test_in_process_sender_serves_requests_and_errors_are_answered(outbox_dir: Path) -> None:
    recorder = RecordingSender()
    storage = FsStorage(outbox_dir)
    sender = OutboxSender(recorder, outbox_dir)
    try:
        entry = add(storage, 7)
        sender.scheduler.add([entry])  # as if sent; due in 2**62 ns
        missing = "0f0f0f0f-0000-4000-8000-0000000000ff"
        with pytest.raises(ControlError, match=f"no queued, in-flight or dead entry '{missing}'"):
            admin.run(outbox_dir, ControlRequest("retry", (entry.id, missing)))
        assert queued(outbox_dir)[entry.id].schedule.next_attempt_ns == 2**62  # untouched
        assert admin.run(outbox_dir, ControlRequest("retry", (entry.id,))) == [entry.id]
        eventually(lambda: recorder.sent, WAIT_S)
    finally:
        sender.close()
    assert [e.message_id for e in recorder.sent] == ["<c7@x>"]
    assert queued(outbox_dir) == {}


def test_a_claim_left_by_a_dead_sender_is_answered_by_the_next(outbox_dir: Path) -> None:
    FsStorage(outbox_dir)
    control.control_dir(outbox_dir)
    rid = "0f0f0f0f-0000-4000-8000-0000000000aa"
    (outbox_dir / "control" / f"{rid}.taken").write_bytes(b"{}")
    sender = OutboxSender(RecordingSender(), outbox_dir)
    try:
        eventually(lambda: (outbox_dir / "control" / f"{rid}.result").exists(), WAIT_S)
    finally:
        sender.close()
    result = control.take_result(outbox_dir, rid)
    assert result is not None and "stopped before answering" in result.error
    assert os.listdir(outbox_dir / "control") == []


def test_admin_refuses_bad_ids_and_timeouts_before_touching_anything(outbox_dir: Path) -> None:
    FsStorage(outbox_dir)
    for bad in ("../../etc/passwd", "", "a/b", "0F0F0F0F-0000-4000-8000-0000000000AA"):
        with pytest.raises(ControlError, match="not an outbox entry id"):
            ControlRequest("purge", (bad,))
    with pytest.raises(ControlError, match="unknown selector 'dead' for retry"):
        ControlRequest("retry", select=frozenset({"dead"}))
    with pytest.raises(ControlError, match="no entries named"):
        ControlRequest("purge")
    with pytest.raises(ControlError, match="positive number"):
        admin.run(
            outbox_dir, ControlRequest("retry", select=frozenset({"all"})), timeout=float("inf")
        )
    done = mailbus("queue", "purge", "../x", "--dir", str(outbox_dir))
    assert done.returncode == 1 and "not an outbox entry id: '../x'" in done.stderr
    done = mailbus("queue", "retry", "--all", "--timeout", "nan", "--dir", str(outbox_dir))
    assert done.returncode == 2 and "positive number of seconds" in done.stderr


def test_request_codec_round_trips() -> None:
    request = ControlRequest(
        "purge", ("0f0f0f0f-0000-4000-8000-000000000001",), frozenset({"dead"})
    )
    assert control.decode_request(request.to_json()) == request
    result = control.Result(request.request_id, ("a", "b"), "oops")
    assert control.decode_result(result.to_json()) == result


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"version": 2, "action": "retry"}',
        b'{"version": 1, "action": "rm -rf", "request_id": "x"}',
        b'{"version": 1, "action": "retry", "select": ["all"], "request_id": 5}',
        b'{"version": 1, "action": "retry", "ids": "abc", "request_id": "x"}',
        b'{"version": 1, "action": "purge", "ids": [1], '
        b'"request_id": "0f0f0f0f-0000-4000-8000-000000000001"}',
        b"\xff\xfe",
        b" " * (control.MAX_REQUEST_BYTES + 1),
    ],
)
def test_malformed_requests_are_refused_clearly(data: bytes) -> None:
    with pytest.raises(ControlError):
        control.decode_request(data)


@given(st.binary(max_size=300))
def test_no_bytes_make_the_decoder_fail_otherwise(data: bytes) -> None:
    with contextlib.suppress(ControlError):
        control.decode_request(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "version": st.sampled_from([1, 2, "1"]),
            "action": st.sampled_from(["retry", "purge", "drop", 1]),
            "request_id": st.sampled_from(["0f0f0f0f-0000-4000-8000-000000000001", "x", None]),
            "ids": _json,
            "select": st.lists(st.sampled_from(["all", "dead", "corrupt", "x"]), max_size=3),
        },
    )
)
def test_json_requests_decode_or_are_refused_clearly(value: dict[str, Any]) -> None:
    try:
        request = control.decode_request(json.dumps(value).encode())
    except ControlError:
        return
    assert request.action in ("retry", "purge") and value["version"] == 1
    assert control.decode_request(request.to_json()) == request

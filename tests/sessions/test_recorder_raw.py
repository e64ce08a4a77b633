"""The optional raw column: a received email's bytes, whole when at most `raw_cap` bytes,
else null; redacted like the other columns; null in parts written before it existed;
carried by the player's replay events."""

from __future__ import annotations

import time
from pathlib import Path

import mailbus
import polars as pl
import pytest
from mailbus.email_message import Email, to_bytes
from mailbus.inprocess import InProcessReceiver
from mailbus.options import Options
from mailbus.sessions.player import Player, replay_events
from mailbus.sessions.reader import open_session
from mailbus.sessions.recorder import DEFAULT_RAW_CAP, Recorder
from mailbus.sessions.schema import REDACTED
from mailbus.waitset import wait_for_message
from sessions_helpers import SAMPLES

PASSWORD = "hunter2-Tr0ub4dor"
DATE = "Fri, 15 Jan 2027 08:00:12 GMT"


def wire(topic: str, body: str, n: int, headers: dict[str, str] | None = None) -> bytes:
    email = Email(
        subject=topic,
        body=body,
        headers={"Source-Timestamp": str(time.time_ns()), "Publisher-GID": "ab"} | (headers or {}),
        message_id=f"<raw{n}@example>",
    )
    return b"Received: from mx (127.0.0.1) by imap\r\n" + to_bytes(email, date=DATE)


def record(directory: Path, emails: list[bytes], **options: int) -> pl.DataFrame:
    with mailbus.Context(Options(password=PASSWORD, username="u@example.org")) as ctx:
        recorder = Recorder(directory, context=ctx, **options)  # type: ignore[arg-type]
        sub = ctx.subscription("lab/raw", depth=100)
        receiver = ctx.transport.receiver
        assert isinstance(receiver, InProcessReceiver)
        for data in emails:
            receiver.push_raw(data)
        ctx.publisher("lab/raw").publish("in process")  # no bytes travelled
        for _ in range(len(emails) + 1):
            assert wait_for_message(sub, 5.0) is not None
        recorder.stop()
    return (
        open_session(directory)
        .read()
        .filter(pl.col("kind") == "email.received")
        .sort("event_index")
    )


def test_raw_bytes_are_recorded_up_to_the_cap_and_redacted(tmp_path: Path) -> None:
    small = wire("lab/raw", "small", 1)
    large = wire("lab/raw", "x" * 3000, 2)
    secret = wire("lab/raw", f"pw {PASSWORD}", 3, {"X-Api-Token": "abc123", "Note": "keep"})
    rows = record(tmp_path / "s", [small, large, secret], raw_cap=2048)
    raws = rows["raw"].to_list()
    assert raws[0] == small  # exactly what arrived
    assert raws[1] is None and rows["body_size"][1] == 3000  # over the cap: body only
    redacted = raws[2]
    assert redacted is not None
    assert PASSWORD.encode() not in redacted and b"abc123" not in redacted
    assert b"X-Api-Token: " + REDACTED.encode() in redacted and b"Note: keep" in redacted
    assert redacted.startswith(b"Received: from mx")
    assert raws[3] is None  # published in process: no bytes
    manifest = open_session(tmp_path / "s").manifest
    assert manifest["raw_cap"] == 2048


def test_raw_cap_zero_records_no_raw_bytes(tmp_path: Path) -> None:
    rows = record(tmp_path / "s", [wire("lab/raw", "small", 1)], raw_cap=0)
    assert rows["raw"].null_count() == len(rows) == 2
    assert DEFAULT_RAW_CAP == 64 * 1024


def test_a_negative_raw_cap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="raw_cap"):
        Recorder(tmp_path / "s", raw_cap=-1)


def test_sessions_recorded_before_the_column_read_it_as_null() -> None:
    session = open_session(SAMPLES / "demo")
    assert "raw" in session.read().columns
    assert session.read()["raw"].null_count() == session.rows
    assert "raw" in session.arrow().column_names


def test_the_player_carries_the_recorded_bytes(tmp_path: Path) -> None:
    data = wire("lab/raw", "small", 1)
    record(tmp_path / "s", [data])
    by_id = {e.message_id: e for e in replay_events(str(tmp_path / "s"))}
    assert by_id["<raw1@example>"].raw == data


def test_a_replayed_message_shows_the_bytes_its_original_was_recorded_with(
    tmp_path: Path,
) -> None:
    from mailbus_workbench.model.eml import eml_of
    from mailbus_workbench.model.inspect import raw_note
    from mailbus_workbench.model.state import WorkbenchModel

    data = wire("lab/raw", "small", 1)
    record(tmp_path / "s", [data])
    model = WorkbenchModel()
    with mailbus.Context() as ctx:  # in process: the replayed email travels as an object
        model.feed.attach(ctx.tracer.add_listener)
        player = Player(str(tmp_path / "s"), ctx, rate=100.0).start()
        assert player.wait(10.0)
    model.pump()
    replayed = model.topics.history("lab/raw")
    assert len(replayed) == 2 and all(r.event.raw is None for r in replayed)
    first = model.recorded_raw.resolve(replayed[0])
    assert first.event.raw == data and first.event.message_id == replayed[0].event.message_id
    assert raw_note(first.event).startswith("Recorded: the")
    assert "<raw1@example>" in raw_note(first.event)
    assert eml_of(first.event).data == data and eml_of(first.event).recorded
    # The message published in process was recorded without bytes: still a rebuild.
    second = model.recorded_raw.resolve(replayed[1])
    assert second is replayed[1]


def test_redacting_raw_bytes_covers_folded_values_and_bare_newlines() -> None:
    from mailbus.sessions.schema import Redactor

    raw = (
        b"Received: from a\r\n\tby b\r\n"
        b"Authorization: Basic dTpw\r\n\t continued-secret\r\n"
        b"Subject: t\r\n\r\nbody with Authorization: Basic not-a-header\r\n"
    )
    assert Redactor().raw(raw) == (
        b"Received: from a\r\n\tby b\r\n"
        b"Authorization: [redacted]\r\n"
        b"Subject: t\r\n\r\nbody with Authorization: Basic not-a-header\r\n"
    )
    bare = b"Cookie: id=1\nSubject: t\n\nhunter2\n"
    assert Redactor(["hunter2"]).raw(bare) == b"Cookie: [redacted]\nSubject: t\n\n[redacted]\n"
    assert Redactor(["hunter2"]).raw(bare, literal=False).endswith(b"\n\nhunter2\n")
    clean = b"Subject: t\r\n\r\nx"
    assert Redactor().raw(clean) is clean  # nothing to redact: the same bytes, no copy


def test_record_refuses_a_negative_raw_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mailbus.cli import main

    assert main(["record", str(tmp_path / "s"), "--raw-cap", "-1", "--seconds", "1"]) == 2
    assert "mailbus record: error: raw_cap >= 0" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_header_the_signature_check_left_out_is_still_redacted_in_the_raw_bytes() -> None:
    # The signature check passes on only the signed headers: a relay's secret-named header
    # is then in the raw bytes but not among the event's headers.
    from mailbus.sessions.schema import Redactor, event_columns
    from mailbus.trace import TraceEvent

    raw = b"X-Api-Token: abc123\r\nSubject: t\r\nSource-Timestamp: 1\r\n\r\nbody"
    event = TraceEvent(
        "email.received",
        1,
        name="t",
        body="body",
        headers={"Source-Timestamp": "1"},
        extra={"signature": "verified"},
        raw=raw,
    )
    (recorded,) = event_columns([(0, event, b"body", 4, False)], Redactor(), raw_cap=1024)["raw"]
    assert recorded == b"X-Api-Token: [redacted]\r\nSubject: t\r\nSource-Timestamp: 1\r\n\r\nbody"


def test_a_header_after_a_malformed_line_is_still_redacted_in_the_raw_bytes() -> None:
    # A line without a colon ends the parser's header block: what follows is in no
    # parsed header, only in the raw bytes.
    from mailbus.sessions.schema import Redactor

    raw = b"Subject: t\r\nbroken line\r\nX-Api-Token: abc123\r\n\r\nbody"
    redacted = b"Subject: t\r\nbroken line\r\nX-Api-Token: [redacted]\r\n\r\nbody"
    assert Redactor().raw(raw) == redacted

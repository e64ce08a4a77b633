"""The Raw tab and `.eml` export: the bytes that arrived when the event carries them,
a rebuild said to be one when not; the workbench keeps raw bytes under a bound."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mailbus.email_message import to_bytes
from mailbus.trace import TraceEvent
from mailbus_workbench.model.eml import ExportError, eml_name, eml_of, write_eml
from mailbus_workbench.model.feed import RAW_KEEP, EventFeed
from mailbus_workbench.model.inspect import raw_note, raw_source, to_email
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from textual.widgets import Static
from wb_helpers import until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import RAW_DATE, fixed_app, message_event

SIZE = (140, 42)
TOPIC = "lab/raw"
# As an IMAP server hands it over: a relay's Received, a DKIM signature, Rich markup and
# an escape sequence in the body, and a byte that is not UTF-8.
RAW = (
    b"Received: from mx.example (127.0.0.1)\r\n\tby imap; Fri, 15 Jan 2027 08:00:13 +0000\r\n"
    b"DKIM-Signature: v=1; a=ed25519-sha256; d=example; s=s1; b=abc\r\n"
    b"Date: Fri, 15 Jan 2027 08:00:12 +0000\r\n"
    b"Subject: lab/raw\r\n"
    b"From: pub@example\r\n"
    b"\r\n"
    b"[bold]not bold[/bold] \x1b[31mred\x1b[0m \xff\r\n"
)


def raw_event(raw: bytes | None = RAW, number: int = 900) -> TraceEvent:
    event = message_event(TOPIC, "[bold]not bold[/bold]", T0 + 12.5, number)
    return dataclasses.replace(event, raw=raw)


def test_raw_source_shows_the_bytes_that_arrived() -> None:
    event = raw_event()
    source = raw_source(event)
    assert source.startswith("Received: from mx.example (127.0.0.1)\n\tby imap;")
    assert "DKIM-Signature: v=1;" in source
    assert "\\xff" in source  # not UTF-8: shown as an escape, not lost
    assert raw_note(event).startswith(f"As received: {len(RAW)} bytes")


def test_without_bytes_the_source_is_rebuilt_and_said_so() -> None:
    event = raw_event(None)
    assert raw_note(event).startswith("Rebuilt from the message")
    assert "Received:" not in raw_source(event, RAW_DATE)
    large = dataclasses.replace(event, extra={"raw_size": 300_000})
    assert raw_note(large).startswith("Rebuilt: the 300,000 bytes that arrived")


def test_the_feed_keeps_raw_bytes_whole_up_to_its_bound() -> None:
    feed = EventFeed()
    small = raw_event(b"x" * RAW_KEEP)
    large = raw_event(b"y" * (RAW_KEEP + 1))
    feed.listener(small)
    feed.listener(large)
    kept, cut = feed.drain()
    assert kept.raw is not None and len(kept.raw) == RAW_KEEP
    assert cut.raw is None and cut.extra["raw_size"] == RAW_KEEP + 1
    assert large.raw is not None  # the shared event is untouched


def test_eml_is_the_exact_bytes_or_a_rebuild(tmp_path: Path) -> None:
    exact = eml_of(raw_event())
    assert exact.exact and exact.data == RAW
    rebuilt_event = raw_event(None)
    rebuilt = eml_of(rebuilt_event, RAW_DATE)
    assert not rebuilt.exact
    assert rebuilt.data == to_bytes(to_email(rebuilt_event), date=RAW_DATE)
    bad = dataclasses.replace(rebuilt_event, name="bad\r\nBcc: x@y")
    with pytest.raises(ExportError, match="cannot build"):
        eml_of(bad)


def test_eml_names_are_safe_and_never_replace_a_file(tmp_path: Path) -> None:
    assert eml_name("../../etc/passwd", 3) == "etc_passwd-3.eml"
    assert eml_name("\x1b[31m", 1) == "31m-1.eml"
    assert eml_name("...", 2) == "message-2.eml"
    record = MessageRecord(7, raw_event())
    first, _ = write_eml(tmp_path, record)
    second, _ = write_eml(tmp_path, record)
    assert (first.name, second.name) == ("lab_raw-7.eml", "lab_raw-7-2.eml")
    assert first.read_bytes() == second.read_bytes() == RAW
    with pytest.raises(ExportError, match="cannot write"):
        write_eml(tmp_path / "missing", record)


@pytest.mark.slow
async def test_raw_tab_and_export_key_show_and_save_the_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.query_one(TopicsView)
        inspector = app.query_one(Inspector)
        await pilot.press("x", "e")  # cleared, nothing inspected: a warning, no file
        await pilot.pause()
        assert inspector.record is None and list(tmp_path.iterdir()) == []
        app.model.feed_events([raw_event()])
        app.refresh_now()
        record = app.model.topics.history(TOPIC)[-1]
        view.inspect(record)
        await pilot.pause()
        assert inspector.texts["raw"] == raw_source(record.event)
        assert inspector.texts["raw_note"].startswith("As received")
        shown = app.query_one("#inspector-raw-text", Static).render().plain
        assert "[bold]not bold[/bold]" in shown  # literally, never as markup
        assert "\x1b" not in shown and "␛[31m" in shown  # the terminal is not driven
        view.focus()
        await pilot.press("e")
        await until(pilot, lambda: any(tmp_path.iterdir()), "the exported file")
        (path,) = tmp_path.iterdir()
        assert path.name == f"lab_raw-{record.number}.eml"
        assert path.read_bytes() == RAW
        # A message that travelled in process: the rebuilt source, said to be one.
        app.model.feed_events([raw_event(None, 901)])
        app.refresh_now()
        other = app.model.topics.history(TOPIC)[-1]
        view.inspect(other)
        await pilot.pause()
        assert inspector.texts["raw_note"].startswith("Rebuilt")
        await pilot.press("e")
        rebuilt = tmp_path / f"lab_raw-{other.number}.eml"
        await until(pilot, rebuilt.exists, "the rebuilt file")
        assert rebuilt.read_bytes() == to_bytes(to_email(other.event), date=RAW_DATE)


def test_recorded_bytes_of_replays_are_kept_under_a_count_and_a_byte_bound() -> None:
    from mailbus_workbench.model.recorded_raw import RecordedRaw

    kept = RecordedRaw(max_kept=3, max_bytes=250)

    def sent(n: int, size: int) -> TraceEvent:
        return TraceEvent(
            "replay.sent", 0, message_id=f"<n{n}@x>", extra={"original": "<o@x>"}, raw=b"r" * size
        )

    for n in range(4):
        kept.add(sent(n, 10))
    assert len(kept) == 3 and kept.bytes == 30  # the oldest went
    kept.add(sent(9, 245))
    assert len(kept) == 1 and kept.bytes == 245  # by bytes too
    record = MessageRecord(1, dataclasses.replace(raw_event(None), message_id="<n9@x>"))
    resolved = kept.resolve(record)
    assert resolved.event.raw == b"r" * 245 and raw_note(resolved.event).startswith("Recorded")
    missing = MessageRecord(2, dataclasses.replace(raw_event(None), message_id="<n0@x>"))
    assert kept.resolve(missing) is missing
    kept.clear()
    assert len(kept) == 0 and kept.bytes == 0

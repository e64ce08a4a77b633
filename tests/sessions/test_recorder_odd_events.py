"""A recording never dies of one event: values that do not fit their column are stored
null with the reason in the event's detail, and every other event is kept."""

from __future__ import annotations

import json
from pathlib import Path

import mailbus
import pytest
from mailbus.sessions.fitting import NOTE_PREFIX
from mailbus.sessions.reader import open_session
from mailbus.sessions.recorder import Recorder

ODD_EVENTS = [
    # (what, fields, the column whose value is replaced)
    ("a timestamp of 10^30", {"source_timestamp_ns": 10**30}, "source_ns"),
    ("a sequence number beyond int64", {"sequence_number": 2**70}, "sequence_number"),
    ("a name that is not UTF-8", {"name": "bad\udcffname"}, "name"),
    ("a header value that is not UTF-8", {"headers": {"Unit": "\ud800"}}, "headers"),
    ("a detail of the wrong type", {"detail": b"bytes, not text"}, None),
    ("a sequence number of the wrong type", {"sequence_number": "7"}, "sequence_number"),
]


@pytest.mark.parametrize(("what", "fields", "column"), ODD_EVENTS, ids=[e[0] for e in ODD_EVENTS])
def test_one_odd_event_costs_only_its_own_field(
    tmp_path: Path, what: str, fields: dict[str, object], column: str | None
) -> None:
    with mailbus.Context() as ctx:
        recorder = Recorder(tmp_path / "s", context=ctx)
        sub, pub = ctx.subscription("t"), ctx.publisher("t")
        pub.publish("before")
        assert mailbus.wait_for_message(sub, 5.0) is not None
        ctx.tracer.event("test.odd", **{"name": "odd/one", **fields})
        pub.publish("after")
        assert mailbus.wait_for_message(sub, 5.0) is not None
        manifest = recorder.stop()
    assert manifest["status"] == "complete", manifest
    assert manifest["counts"]["fields_nulled"] >= 1
    saved = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert saved["counts"]["fields_nulled"] == manifest["counts"]["fields_nulled"]
    frame = open_session(tmp_path / "s").read()
    bodies = frame.filter(frame["kind"] == "message.published")["body"].to_list()
    assert bodies == [b"before", b"after"]  # the events around it are all there
    odd = frame.filter(frame["kind"] == "test.odd")
    assert odd.height == 1
    detail = odd["detail"][0]
    assert NOTE_PREFIX in detail
    if column is None:  # the detail itself was replaced: only the note is left
        assert detail.startswith(NOTE_PREFIX) and "detail" in detail
    else:
        assert odd[column][0] is None
        assert f"{column}:" in detail


def test_a_clean_recording_notes_nothing(tmp_path: Path) -> None:
    with mailbus.Context() as ctx:
        recorder = Recorder(tmp_path / "s", context=ctx)
        ctx.publisher("t").publish("x")
        manifest = recorder.stop()
    assert manifest["counts"]["fields_nulled"] == 0
    frame = open_session(tmp_path / "s").read()
    assert not any(NOTE_PREFIX in (d or "") for d in frame["detail"].to_list())

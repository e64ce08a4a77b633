"""MCAP both ways: `mailbus export --format mcap` writes what the mcap library reads back
(one message per recorded email, bodies valid against their channel's schema), an
exported session read back replays the same emails in the same order, and an MCAP file
written elsewhere opens, replays and analyses, its undecodable channels refused."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import jsonschema
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mailbus.cli import main
from mailbus.sessions import mcap_format, mcap_import
from mailbus.sessions.mcap_export import ExportError, export_mcap
from mailbus.sessions.player import replay_events
from mailbus.sessions.reader import open_session
from mailbus.sessions.schema import arrow_schema
from mailbus.trace import TraceEvent
from mcap.reader import make_reader
from mcap_helpers import T0, email_rows, run_mailbus, write_foreign
from sessions_helpers import SAMPLE_NAMES, SAMPLES, write_session


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test converts into a cache of its own."""
    path = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_an_export_is_read_back_by_the_mcap_library(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.mcap"
    assert main(["export", str(SAMPLES / name), "--format", "mcap", "--output", str(out)]) == 0
    emails = email_rows(SAMPLES / name)
    rows = open_session(SAMPLES / name).read().height
    with open(out, "rb") as handle:
        reader = make_reader(handle, validate_crcs=True)
        summary = reader.get_summary()
        assert summary is not None and summary.statistics is not None
        assert summary.chunk_indexes  # chunked and indexed: readers seek
        by_topic = {c.topic: c for c in summary.channels.values()}
        counts = summary.statistics.channel_message_counts
        events = by_topic.pop(mcap_format.EVENTS_TOPIC)
        assert counts[events.id] == rows  # every row's envelope
        # One channel per topic and service; one message per recorded email.
        assert set(by_topic) == {"/" + n for n in emails["name"].unique()}
        assert sum(counts[c.id] for c in by_topic.values()) == emails.height
        validators = {
            c.id: jsonschema.Draft202012Validator(json.loads(summary.schemas[c.schema_id].data))
            for c in by_topic.values()
        }
        bodies = []
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            assert channel.message_encoding == "json" and schema is not None
            assert schema.encoding == "jsonschema"
            if channel.id == events.id:
                continue
            data = json.loads(message.data)
            validators[channel.id].validate(data)  # raises when a body does not fit
            bodies.append((channel.topic, message.log_time, message.publish_time, data))
    expected = []
    for row in emails.iter_rows(named=True):
        body = row["body"]
        try:
            value = json.loads(body)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            value = {"text": body.decode()}
        log_time = row["reception_ns"] or row["recorded_ns"]
        expected.append(("/" + row["name"], log_time, row["source_ns"] or log_time, value))
    assert bodies == expected


def test_foxglove_plots_fields_of_json_bodies(tmp_path: Path) -> None:
    out = tmp_path / "demo.mcap"
    export_mcap(open_session(SAMPLES / "demo"), out)
    with open(out, "rb") as handle:
        summary = make_reader(handle).get_summary()
    assert summary is not None
    schemas = {
        c.topic: json.loads(summary.schemas[c.schema_id].data) for c in summary.channels.values()
    }
    pose = schemas["/robot/pose"]
    assert pose["type"] == "object"
    assert pose["properties"] == {
        "x": {"type": "number"},
        "y": {"type": "number"},
        "theta": {"type": "number"},
    }
    # A service's channel: requests (JSON arrays, wrapped as text) and responses.
    assert schemas["/demo/add"]["properties"] == {
        "text": {"type": "string"},
        "sum": {"type": "number"},  # as the live bridge says: an int then a float stays valid
    }
    assert schemas["/robot/log"]["properties"] == {"text": {"type": "string"}}


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_an_exported_session_replays_the_same_emails_in_the_same_order(
    name: str, tmp_path: Path
) -> None:
    original = open_session(SAMPLES / name)
    out = tmp_path / f"{name}.mcap"
    export_mcap(original, out)
    back = open_session(out)
    assert back.name == f"{name}.mcap"
    before, after = replay_events(original), replay_events(back)
    assert len(before) > 100
    assert after == before
    # Not only what a replay needs: every column of every row comes back.
    columns = original.read().drop("session").sort("event_index")
    assert back.read().drop("session").sort("event_index").equals(columns)
    assert back.manifest["participant"] == original.manifest["participant"]


def test_bodies_that_are_not_json_objects_come_back_exact(tmp_path: Path) -> None:
    bodies = ['{"a": 1}', "[1,2]", "  7 ", '"quoted"', "plain text", "", '{"a": NaN}', "{bad"]
    events = [
        TraceEvent(
            "message.published",
            T0 + i,
            name="odd/bodies",
            gid="G1",
            message_id=f"<b{i}@t>",
            source_timestamp_ns=T0 + i,
            body=body,
            sequence_number=i + 1,
        )
        for i, body in enumerate(bodies)
    ]
    session = write_session(tmp_path / "odd", events)
    # A body that is not UTF-8 (a session written by another tool) travels as base64.
    table = pq.read_table(next(session.glob("part-*.parquet")))
    table = table.set_column(
        table.schema.get_field_index("body"),
        pa.field("body", pa.binary()),
        pa.array([b"\xff\xfe" if i == 4 else v for i, v in enumerate(table["body"].to_pylist())]),
    )
    pq.write_table(table.cast(arrow_schema()), next(session.glob("part-*.parquet")))
    out = tmp_path / "odd.mcap"
    export_mcap(open_session(session), out)
    with open(out, "rb") as handle:
        datas = [
            json.loads(m.data)
            for _, c, m in make_reader(handle).iter_messages(topics=["/odd/bodies"])
        ]
    assert datas == [
        {"a": 1},
        {"text": "[1,2]"},  # JSON, but no object: wrapped as the live bridge wraps it
        {"text": "  7 "},
        {"text": '"quoted"'},
        {"base64": base64.b64encode(b"\xff\xfe").decode()},
        {"text": ""},
        {"text": '{"a": NaN}'},  # NaN is not JSON, whatever Python's parser accepts
        {"text": "{bad"},
    ]
    back = open_session(out).read().sort("event_index")["body"].to_list()
    assert back == open_session(session).read().sort("event_index")["body"].to_list()


def test_export_refuses_to_overwrite_and_names_the_problem(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "x.mcap"
    out.write_bytes(b"mine")
    args = ["export", str(SAMPLES / "gaps"), "--format", "mcap", "--output", str(out)]
    assert main(args) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == b"mine"
    assert main([*args, "--force"]) == 0
    assert out.read_bytes().startswith(mcap_import.MAGIC)
    with pytest.raises(ExportError, match="is a directory"):
        export_mcap(open_session(SAMPLES / "gaps"), tmp_path)
    assert main(["export", str(tmp_path / "nothing"), "--format", "mcap", "-o", str(out)]) == 2
    assert "no session at" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["x.mcap"]  # no temporary file left


@pytest.mark.parametrize("chunked", [True, False], ids=["indexed", "unchunked"])
def test_a_foreign_file_opens_with_its_json_channels_and_refuses_the_rest(
    tmp_path: Path, chunked: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "foreign.mcap"
    counts = write_foreign(path, chunked=chunked)
    before = path.stat()
    session = open_session(path)
    err = capsys.readouterr().err
    assert "skipped channel '/camera/log' (message encoding 'protobuf'" in err
    assert (
        "skipped channel '/chatter' (message encoding 'cdr', schema 'std_msgs/msg/String')" in err
    )
    refused = {r["topic"]: r["messages"] for r in session.manifest["mcap"]["refused"]}
    assert refused == {"/camera/log": 60, "/chatter": 60}
    frame = session.read()
    assert frame.height == sum(counts.values())
    names = frame.group_by("name").len().sort("name").rows()
    assert names == [("odd_topic", 6), ("robot/pose", 60), ("sensors/temp", 30)]
    assert session.manifest["mcap"]["names"] == {"/odd\ttopic ": "odd_topic"}
    pose = frame.filter(pl.col("name") == "robot/pose").sort("recorded_ns")
    assert pose["body"][3] == b'{"x": 0.3}'
    assert pose["sequence_number"].to_list() == list(range(1, 61))
    assert (pose["reception_ns"] - pose["source_ns"]).unique().to_list() == [1_000_000]
    assert frame["message_id"].n_unique() == frame.height
    # Replayed as received messages in time order, each with its own Message-ID.
    events = replay_events(session)
    assert len(events) == frame.height
    assert [e.offset_ns for e in events] == sorted(e.offset_ns for e in events)
    assert events[0].name == "robot/pose" and events[0].body == '{"x": 0.0}'
    # The user's file is read, never written; nothing is put beside it.
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "foreign.mcap"]


def test_a_file_is_converted_once_and_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "foreign.mcap"
    write_foreign(path)
    said: list[str] = []
    first = mcap_import.open_mcap(path, report=said.append)
    assert any(line.startswith("reading ") for line in said)
    said.clear()
    again = mcap_import.open_mcap(path, report=said.append)
    assert again.path == first.path
    assert not any(line.startswith("reading ") for line in said)  # from the cache
    assert len(said) == 2  # the refused channels are said every time
    export_mcap(open_session(SAMPLES / "gaps"), path, overwrite=True)
    changed = mcap_import.open_mcap(path, report=said.append)
    assert changed.path != first.path
    assert changed.read().height == open_session(SAMPLES / "gaps").read().height


def test_mcap_names_become_valid_mailbus_names() -> None:
    from mailbus.names import check_name

    for topic in ["/a/b", "a/b", "//x", "/", "", " \n ", "/x\u2028y", "/" + "z" * 400]:
        check_name(mcap_import.mailbus_name(topic))
    assert mcap_import.mailbus_name("/robot/pose") == "robot/pose"
    assert mcap_import.mailbus_name("/" + "z" * 400) != mcap_import.mailbus_name("/" + "z" * 401)


def test_the_workbench_opens_a_foreign_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailbus_workbench import launch
    from mailbus_workbench.model import session_control

    path = tmp_path / "foreign.mcap"
    counts = write_foreign(path)
    opened = session_control.open_session(str(path))
    assert opened.rows == sum(counts.values())
    timeline = session_control.session_timeline(opened)  # from the index of the conversion
    assert timeline.total == sum(counts.values())
    # `mailbus open FILE.mcap` converts before the app starts, then opens the app on it.
    started: list[str | None] = []
    monkeypatch.setattr(
        launch, "run_app", lambda config=None, session=None, **_: started.append(session) or 0
    )
    assert main(["open", str(path)]) == 0
    assert started == [str(path)]


@pytest.mark.slow
def test_replay_and_analyze_commands_read_a_foreign_file(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "foreign.mcap"
    counts = write_foreign(path)
    total = sum(counts.values())
    done = run_mailbus("analyze", str(path), "--format", "json", cache=cache)
    assert done.returncode == 0, done.stderr
    tables = json.loads(done.stdout)
    topics = {row["topic"]: row["received"] for row in tables["topics"]}
    assert topics == {"robot/pose": 60, "sensors/temp": 30, "odd_topic": 6}
    assert "skipped channel '/camera/log'" in done.stderr
    recorded = tmp_path / "replayed"
    done = run_mailbus("replay", str(path), "--rate", "100", "--record", str(recorded), cache=cache)
    assert done.returncode == 0, done.stderr
    assert f"replayed {total} of {total} emails" in done.stderr
    sent = open_session(recorded).read().filter(pl.col("kind") == "replay.sent")
    assert sent.height == total
    assert sent.sort("event_index")["name"].head(3).to_list() == [
        "robot/pose",
        "sensors/temp",
        "odd_topic",
    ]
    # The tables as a user reads them name the topics (the conversion is cached now).
    assert main(["analyze", str(path), "--table", "topics"]) == 0
    out = capsys.readouterr().out
    assert "robot/pose" in out and "odd_topic" in out, out  # (long names wrap)


def test_the_conversion_writes_bounded_row_groups_and_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the conversion holds is one row group: it writes as it reads."""
    monkeypatch.setattr(mcap_import, "ROW_GROUP_ROWS", 50)
    monkeypatch.setattr(mcap_import, "PART_ROWS", 200)
    out = tmp_path / "gaps.mcap"
    export_mcap(open_session(SAMPLES / "gaps"), out)
    back = open_session(out)
    sizes = [pq.ParquetFile(p).metadata for p in back.parts]
    assert back.rows == 628 and len(back.parts) == 4
    assert all(m.num_rows <= 200 for m in sizes)
    assert {m.row_group(i).num_rows for m in sizes for i in range(m.num_row_groups)} == {50, 28}
    assert [p["rows"] for p in back.manifest["parts"]] == [200, 200, 200, 28]
    assert replay_events(back) == replay_events(open_session(SAMPLES / "gaps"))


def test_a_quoted_glob_matches_mcap_files(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    for name in ("a", "b"):
        export_mcap(open_session(SAMPLES / "gaps"), tmp_path / f"{name}.mcap")
    assert main(["analyze", str(tmp_path / "*.mcap"), "--table", "topics", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["topics"]
    assert {row["session"] for row in rows} == {"a.mcap", "b.mcap"}


def test_a_cache_directory_someone_else_may_write_is_not_used(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback cache lives in the shared temporary directory: one made there by
    another user, or writable by others, could hold planted sessions."""
    path = tmp_path / "foreign.mcap"
    write_foreign(path)
    planted = cache / "mailbus" / "mcap"
    planted.mkdir(parents=True)
    planted.chmod(0o777)
    monkeypatch.setattr(mcap_import.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    session = mcap_import.open_mcap(path, report=None)
    assert session.path.parent == tmp_path / "tmp" / f"mailbus-mcap-{os.getuid()}"
    assert not any(planted.iterdir())
    planted.chmod(0o700)  # the user's own again: converted there next time
    shutil.rmtree(session.path)
    assert mcap_import.open_mcap(path, report=None).path.parent == planted

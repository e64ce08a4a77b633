"""Find's query language and the exporters, without Textual."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from mailbus import query
from mailbus_workbench.model import export
from mailbus_workbench.model.find import QueryError, find, parse_query
from mailbus_workbench.model.state import WorkbenchModel
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_model, message_event, sample_events


def model_of(bodies: dict[str, list[str]]) -> WorkbenchModel:
    model = WorkbenchModel(clock=FrozenClock(T0 + 60))
    n = 0
    for topic, texts in bodies.items():
        for text in texts:
            n += 1
            model.feed_events([message_event(topic, text, T0 + n, n)])
    model.pump()
    return model


def found(model: WorkbenchModel, query: str) -> list[str]:
    return [r.body for r in find(model.topics, parse_query(query)).records]


def test_celsius_above_25_finds_exactly_the_readings_above_25() -> None:
    readings = [24, 25, 25.5, 30, -3]
    model = model_of(
        {
            "sensors/temperature": [json.dumps({"celsius": c}) for c in readings]
            + ['{"celsius": "hot"}', "celsius 99", "{not json"],
            "sensors/other": ['{"fahrenheit": 90}', '{"celsius": 26.25}'],
        }
    )
    assert found(model, "celsius>25") == [
        '{"celsius": 25.5}',
        '{"celsius": 30}',
        '{"celsius": 26.25}',
    ]
    assert found(model, "celsius>=25 celsius<30") == [
        '{"celsius": 25}',
        '{"celsius": 25.5}',
        '{"celsius": 26.25}',
    ]
    assert found(model, "sensors/temperature.celsius>25") == [
        '{"celsius": 25.5}',
        '{"celsius": 30}',
    ]
    assert found(model, "celsius=hot") == ['{"celsius": "hot"}']
    assert found(model, "celsius=-3") == ['{"celsius": -3}']


def test_on_the_fixed_data_a_comparison_finds_what_the_bodies_say() -> None:
    model = fixed_model()
    expected = [
        (e.name, json.loads(e.body or "")["celsius"])
        for e in sample_events()
        if e.name == "sensors/temperature" and json.loads(e.body or "")["celsius"] > 22.5
    ]
    result = find(model.topics, parse_query("celsius>22.5"))
    assert expected and [(r.event.name, json.loads(r.body)["celsius"]) for r in result.records] == (
        expected
    )
    assert result.searched == model.topics.held() and not result.truncated
    assert find(model.topics, parse_query("celsius>25")).records == []  # the data peaks at 23


def test_paths_indexes_operators_and_headers() -> None:
    model = model_of(
        {
            "robot/pose": [
                json.dumps({"pose": {"x": 0.5, "tags": ["a", "b"]}, "ok": True}),
                json.dumps({"pose": {"x": 0.75, "tags": ["c"]}, "ok": False, "note": None}),
            ],
            "robot/log": ["ERROR disk full", "WARN low battery", "INFO ok"],
        }
    )
    first, second = [r.body for r in model.topics.history("robot/pose")]
    assert found(model, "pose.x<=0.5") == [first]
    assert found(model, "pose.x!=0.5") == [second]
    assert found(model, "pose.tags.0=c") == [second]
    assert found(model, "pose.tags.5=c") == []
    assert found(model, "ok=true") == [first]
    assert found(model, "note=null") == [second]
    assert found(model, "pose.tags~b") == [first]
    # Subject is the topic; regexes and quoted text read the body.
    assert found(model, "Subject=robot/log /^(ERROR|WARN)/") == [
        "ERROR disk full",
        "WARN low battery",
    ]
    assert found(model, '"low battery"') == ["WARN low battery"]
    assert found(model, "/error/i") == ["ERROR disk full"]
    assert found(model, r"/\bok$/") == ["INFO ok"]
    # A header wins over a JSON field of the same name.
    gid = model.topics.history("robot/log")[0].event.source_gid
    assert len(found(model, f"Publisher-GID={gid.upper()} Subject~log")) == 3


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ('"unclosed', "a quote is not closed"),
        ("/(/", "not a regular expression"),
        ("//", "the regular expression is empty"),
        ("x" * 2_001, "longer than"),
    ],
)
def test_a_bad_query_gets_a_clear_error(query: str, reason: str) -> None:
    with pytest.raises(QueryError, match=reason):
        parse_query(query)


def test_the_topic_filter_compares_json_fields_too() -> None:
    event = message_event("sensors/temperature", '{"celsius": 26}', T0, 1)
    assert query.parse("temp celsius>25").matches(event)
    assert query.parse("temp celsius>25").topic_text == "temp"
    assert not query.parse("celsius<=25").matches(event)
    assert query.parse("Subject~temp").matches(event)


def test_tables_round_trip_in_every_format(tmp_path: Path) -> None:
    model = fixed_model()
    records = model.topics.history("robot/pose")
    rows = export.message_rows(records)
    shown = export.frame(rows, export.MESSAGE_SCHEMA)
    calls = export.call_rows(model.services.traces(), model.clock(), model.services.timeout_s)
    for suffix in export.TABLE_SUFFIXES:
        path = tmp_path / f"pose{suffix}"
        assert export.write_table(rows, export.MESSAGE_SCHEMA, path) == len(records)
        back = export.read_table(path, export.MESSAGE_SCHEMA)
        assert back.equals(shown), suffix
        assert back["body"].to_list() == [r.body for r in records]
        call_path = tmp_path / f"calls{suffix}"
        export.write_table(calls, export.CALL_SCHEMA, call_path)
        assert export.read_table(call_path, export.CALL_SCHEMA).equals(
            export.frame(calls, export.CALL_SCHEMA)
        ), suffix
    # Every status the fixed data has, answered calls with their latency.
    statuses = set(pl.read_parquet(tmp_path / "calls.parquet")["status"])
    assert {"answered", "timed out", "orphaned", "duplicate"} <= statuses


def test_a_message_as_json_keeps_its_body_and_headers(tmp_path: Path) -> None:
    record = fixed_model().topics.history("sensors/temperature")[-1]
    path = tmp_path / "m.json"
    export.write_json(export.message_json(record), path)
    document = json.loads(path.read_text())
    assert document["body"] == record.body and document["json"] == json.loads(record.body)
    assert document["headers"]["Publisher-GID"] == record.event.source_gid
    assert (document["topic"], document["number"]) == ("sensors/temperature", record.number)


def test_bad_paths_get_clear_errors_and_lose_nothing(tmp_path: Path) -> None:
    rows = export.message_rows(fixed_model().topics.history("robot/log"))
    kept = tmp_path / "kept.csv"
    kept.write_text("precious")
    with pytest.raises(export.ExportExists):
        export.write_table(rows, export.MESSAGE_SCHEMA, kept)
    assert kept.read_text() == "precious"
    with pytest.raises(export.ExportError, match="must end with"):
        export.write_table(rows, export.MESSAGE_SCHEMA, tmp_path / "log.xlsx")
    with pytest.raises(export.ExportError, match="no folder"):
        export.write_table(rows, export.MESSAGE_SCHEMA, tmp_path / "missing" / "log.csv")
    with pytest.raises(export.ExportError, match="is a folder"):
        export.write_table(rows, export.MESSAGE_SCHEMA, tmp_path)
    with pytest.raises(export.ExportError, match="cannot write in /proc"):
        export.write_table(rows, export.MESSAGE_SCHEMA, Path("/proc/log.csv"))
    with pytest.raises(export.ExportError, match=r"end the name with \.json"):
        export.write_json("{}", tmp_path / "m.txt")
    assert export.write_table(rows, export.MESSAGE_SCHEMA, kept, overwrite=True) == len(rows)
    assert kept.read_text().startswith("topic,number,")
    assert sorted(os.listdir(tmp_path)) == ["kept.csv"]  # no temporary file left behind
    fresh = tmp_path / "fresh.csv"
    export.write_table(rows, export.MESSAGE_SCHEMA, fresh)
    umask = os.umask(0o022)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private 0600


def test_the_suggested_path_names_the_topic_and_the_time() -> None:
    assert export.suggest_path("robot/pose", T0 + 12, ".csv") == "./robot_pose-20270115-080012.csv"
    assert export.suggest_path("../../etc", T0, ".csv") == "./etc-20270115-080000.csv"

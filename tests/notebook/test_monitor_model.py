"""The notebook monitor's model without a browser: pacing, bounded memory, frames, pairing."""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

import polars as pl
import pytest
from mailbus.context import Context
from mailbus.notebook import Monitor
from mailbus.notebook.model import MonitorModel, json_path_value, split_field
from mailbus.notebook.pacing import UpdatePacer
from mailbus.sessions.reader import open_session
from mailbus.trace import Kind, TraceEvent
from waiting import eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def message(topic: str, body: str, sequence: int = 0) -> TraceEvent:
    return TraceEvent(
        Kind.RECEIVED,
        time.time_ns(),
        name=topic,
        sequence_number=sequence,
        message_id=f"<m{sequence}@x>",
        body=body,
        size=len(body),
        detail="message",
    )


def test_the_pacer_allows_at_most_its_rate_whatever_the_calls() -> None:
    pacer = UpdatePacer(4.0)
    # 10 000 attempts over 2.5 simulated seconds: at most 4 per second go.
    sent = sum(pacer.due(i * 0.00025) for i in range(10_000))
    assert sent == 10  # at 0, 0.25, ..., 2.25
    assert pacer.wait_s(2.4) == pytest.approx(0.1)
    # A stalled kernel does not burst to catch up afterwards.
    assert pacer.due(100.0) and not pacer.due(100.1)


@pytest.mark.parametrize("hz", [0.0, -1.0, 21.0, float("nan"), float("inf")])
def test_the_pacer_refuses_a_rate_it_cannot_honour(hz: float) -> None:
    with pytest.raises(ValueError, match="update rate must be in"):
        UpdatePacer(hz)


@pytest.mark.slow
def test_memory_stays_bounded_whatever_the_traffic() -> None:
    clock = FakeClock()
    model = MonitorModel(
        max_events=100, max_samples=50, max_calls=10, max_topics=3, window_s=5.0, clock=clock
    )
    model.watch_field("a.v")
    for i in range(5_000):
        clock.now += 0.001
        model.listener(message(f"{'abcdef'[i % 6]}", json.dumps({"v": i}), i))
        request = TraceEvent(
            Kind.RECEIVED, 0, name="svc", message_id=f"<r{i}@x>", detail="request", body="[]"
        )
        model.listener(request)
    assert model.frame().height == 100
    assert len(model._calls) == 10
    assert model.ignored_topics > 0
    snap = model.snapshot()
    assert [t["topic"] for t in snap["topics"]] == ["a", "b", "c"]
    assert all(len(t.times) <= 50 for t in model._topics.values())
    assert len(snap["fields"]["a.v"]) <= 50
    assert model.seen == 10_000


def test_rates_come_from_the_sliding_window() -> None:
    clock = FakeClock()
    model = MonitorModel(window_s=10.0, clock=clock)
    for _ in range(50):  # 10 Hz for 5 s
        clock.now += 0.1
        model.listener(message("t", "{}"))
    snap = model.snapshot("t")
    assert snap["topics"][0]["count"] == 50
    assert snap["topics"][0]["rate_hz"] == pytest.approx(10.0, rel=0.05)
    assert sum(v for _, v in snap["rates"]["t"]) == 50
    clock.now += 30.0  # everything left the window; the count stays
    snap = model.snapshot("t")
    assert snap["topics"][0] == {"topic": "t", "count": 50, "bytes": 100, "rate_hz": 0.0}
    assert snap["latest"] == "{}"


def test_fields_sample_numbers_at_json_paths() -> None:
    model = MonitorModel(clock=FakeClock())
    model.listener(message("robot/pose", json.dumps({"x": 0.5})))
    model.watch_field("robot/pose.x")
    model.watch_field("robot/pose.list.1")
    for body in ({"x": 1.5, "list": [0, 7]}, {"x": "text"}, {"y": 2}, "not json"):
        model.listener(message("robot/pose", json.dumps(body) if isinstance(body, dict) else body))
    series = model.snapshot()["fields"]
    assert [v for _, v in series["robot/pose.x"]] == [1.5]
    assert [v for _, v in series["robot/pose.list.1"]] == [7.0]
    assert split_field("robot/pose.x", ["robot/pose"]) == ("robot/pose", ("x",))
    assert json_path_value('{"a": true}', ("a",)) == 1.0  # as the plot reads it
    assert json_path_value('{"a": "x"}', ("a",)) is None
    assert split_field('robot/arm["j 1"][2]', []) == ("robot/arm", ("j 1", 2))
    assert json_path_value("[" * 100_000 + "]" * 100_000, ("0",)) is None  # too deep: None
    with pytest.raises(ValueError, match=r"a field is 'topic\.key"):
        model.watch_field("nodot")


def test_frame_has_a_recordings_columns_and_filters(tmp_path: Path) -> None:
    model = MonitorModel(body_cap=8, secrets=["hunter2"])
    for i in range(20):
        model.listener(message("a" if i % 2 else "b", f"hunter2 body {i}", i))
    frame = model.frame()
    sample = open_session(Path(__file__).parents[2] / "sample_sessions" / "demo").read()
    assert frame.schema == pl.Schema({k: v for k, v in sample.schema.items() if k != "session"})
    assert frame.height == 20
    assert frame["body_truncated"].all()
    assert not any(b"hunter2" in body for body in frame["body"])
    assert model.frame(topic="a", last=3)["sequence_number"].to_list() == [15, 17, 19]
    assert model.frame(last=0).height == 0
    with pytest.raises(ValueError, match="last must be >= 0"):
        model.frame(last=-1)


def test_services_pair_requests_with_responses() -> None:
    model = MonitorModel()
    model.listener(
        TraceEvent(
            Kind.RECEIVED,
            0,
            name="s",
            message_id="<q1@x>",
            source_timestamp_ns=1_000_000,
            detail="request",
            body="[1]",
        )
    )
    model.listener(
        TraceEvent(Kind.RECEIVED, 0, name="s", message_id="<q2@x>", detail="request", body="[]")
    )
    model.listener(
        TraceEvent(
            Kind.RECEIVED,
            0,
            name="s",
            message_id="<a1@x>",
            in_reply_to="<q1@x>",
            reception_timestamp_ns=4_000_000,
            detail="response",
            body='{"sum": 1}',
        )
    )
    calls = model.services()
    assert calls.select("request_id", "rtt_ms", "status", "response").rows() == [
        ("<q1@x>", 3.0, "answered", '{"sum": 1}'),
        ("<q2@x>", None, "pending", None),
    ]


def test_monitor_on_the_demo_counts_calls_records_and_stops(tmp_path: Path) -> None:
    started = time.monotonic()
    monitor = Monitor.demo(speed=4.0, seed=3, update_hz=20.0, fields=["robot/pose.x"])
    try:
        eventually(lambda: len(monitor.snapshot.get("topics", [])) >= 3)
        eventually(lambda: monitor.services().filter(pl.col("status") == "answered").height > 0)
        result = monitor.call("demo/add", [1, 2, 3], timeout=5.0)
        assert result.ok and json.loads(result.response or "") == {"sum": 6}
        assert result.in_reply_to == result.request_id and "demo/add" in result._repr_html_()
        published = monitor.publish("notes/cell", {"hello": 1})
        assert html.escape(published.message_id) in published._repr_html_()
        with monitor.record(tmp_path / "slice") as recorder:
            eventually(lambda: sum(recorder.status()[k] for k in ("written", "queued")) > 20)
        session = open_session(tmp_path / "slice")
        assert session.complete and session.read().height > 20
        assert monitor.frame(topic="robot/pose").height > 0
        assert 0 < monitor.updates <= 20.0 * (time.monotonic() - started) + 1  # the bound
        assert monitor.snapshot["fields"]["robot/pose.x"]  # the field reached the widget
        # A second monitor on the same context (a re-run cell) replaces the first.
        second = Monitor(monitor.context)
        assert second.running and not monitor.running
        assert monitor.model.listener not in monitor.context.tracer._listeners
        second.stop()
    finally:
        monitor.stop()
        if monitor.context.is_initialized:
            monitor.context.shutdown()


def test_a_monitor_of_its_own_context_shuts_it_down() -> None:
    monitor = Monitor.demo(speed=4.0, seed=1)
    monitor.stop()
    monitor.stop()  # twice is fine
    assert not monitor.context.is_initialized
    assert not monitor._thread.is_alive()


def test_a_call_that_times_out_is_a_result() -> None:
    with Context() as context:
        monitor = Monitor(context)
        try:
            result = monitor.call("nobody/home", "[]", timeout=0.2)
        finally:
            monitor.stop()
        assert result.status == "timeout" and result.response is None and not result.ok
        assert context.is_initialized  # not ours: left running


def test_re_running_a_cell_stops_the_monitor_it_made_before() -> None:
    from types import SimpleNamespace

    from mailbus.notebook import monitor as monitor_module

    monitor_module._on_pre_run_cell(SimpleNamespace(cell_id="cell-1"))
    first = Monitor.demo(speed=4.0, seed=1)
    second = None
    try:
        monitor_module._on_pre_run_cell(SimpleNamespace(cell_id="cell-1"))
        second = Monitor.demo(speed=4.0, seed=1)
        assert not first.running and not first.context.is_initialized
        assert second.running
        monitor_module._on_pre_run_cell(SimpleNamespace(cell_id="cell-2"))
        third = Monitor(second.context)  # same context: replaces too
        assert not second.running and third.running
        third.stop()
        assert second.model.listener not in second.context.tracer._listeners
    finally:
        monitor_module._on_pre_run_cell(SimpleNamespace(cell_id=None))
        first.stop()
        if second is not None:
            second.stop()


def test_a_monitor_from_an_options_file_sees_its_topics(tmp_path: Path) -> None:
    from mailbus.errors import ConfigError

    config = tmp_path / "mailbus.toml"
    config.write_text('transport = "inprocess"\n', encoding="utf-8")
    monitor = Monitor.from_options(config, topics=["notes/a"], update_hz=20.0)
    try:
        for i in range(3):
            monitor.publish("notes/a", {"i": i})

        def counts() -> dict[str, int]:
            return {t["topic"]: t["count"] for t in monitor.model.snapshot()["topics"]}

        eventually(lambda: counts().get("notes/a") == 3)
        assert monitor.frame(topic="notes/a").filter(pl.col("kind") == "email.received").height == 3
    finally:
        monitor.stop()
    assert not monitor.context.is_initialized
    config.write_text("transport = 'pigeon'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="transport"):
        Monitor.from_options(config)


def test_bad_input_from_a_cell_gets_a_clear_error(tmp_path: Path) -> None:
    from mailbus.errors import InvalidNameError
    from mailbus.sessions.recorder import RecorderError

    with Context() as context:
        monitor = Monitor(context)
        try:
            with pytest.raises(InvalidNameError, match="topic name"):
                monitor.publish("bad\nname", "x")
            with pytest.raises(InvalidNameError, match="service name"):
                monitor.call("bad\nservice", "[]", timeout=1.0)
            with pytest.raises(ValueError, match="a field is"):
                monitor.watch("no-dot")
            assert monitor.fields == []
            with monitor.record(tmp_path / "s"):
                monitor.publish("notes/a", "kept")
            with (
                pytest.raises(RecorderError, match="already holds a session"),
                monitor.record(tmp_path / "s"),
            ):
                pass
            assert open_session(tmp_path / "s").complete  # the first slice is untouched
        finally:
            monitor.stop()


def test_the_first_rate_is_measured_over_the_time_really_watched() -> None:
    clock = FakeClock()
    model = MonitorModel(window_s=30.0, clock=clock)
    for _ in range(6):  # a burst just after the start: not 44 Hz
        clock.now += 0.02
        model.listener(message("t", "{}"))
    assert model.snapshot()["topics"][0]["rate_hz"] is None  # not measured yet
    clock.now = model.started + 1.0
    assert model.snapshot()["topics"][0]["rate_hz"] == pytest.approx(6.0)
    clock.now = model.started + 3.0
    assert model.snapshot()["topics"][0]["rate_hz"] == pytest.approx(2.0)
    assert model.snapshot()["watched_s"] == pytest.approx(3.0)


def test_the_inspected_message_has_its_headers_and_raw_bytes_redacted() -> None:
    model = MonitorModel(secrets=["hunter2"])
    raw = b"Subject: t\r\nAuthorization: hunter2\r\n\r\n" + b'{"v": "hunter2"}' + b"x" * 9000
    event = TraceEvent(
        Kind.RECEIVED,
        0,
        name="t",
        message_id="<m1@x>",
        sequence_number=7,
        body='{"v": "hunter2"}',
        headers={"Subject": "t", "Authorization": "hunter2"},
        detail="message",
        raw=raw,
    )
    model.listener(event)
    view = model.snapshot("t")["message"]
    assert view["message_id"] == "<m1@x>" and view["sequence_number"] == 7
    assert "hunter2" not in json.dumps(view)
    assert ["Subject", "t"] in view["headers"]
    assert view["raw"].startswith("Subject: t") and view["raw_cut"]
    model.listener(message("u", "{}"))  # the in-process transport: no bytes travelled
    assert model.snapshot("u")["message"]["raw"] is None
    assert model.snapshot("nothing")["message"] is None


def test_calls_are_shown_newest_first_with_latency_and_the_pair() -> None:
    model = MonitorModel()
    for i in range(40):
        model.listener(
            TraceEvent(
                Kind.RECEIVED,
                0,
                name="s",
                message_id=f"<q{i}@x>",
                source_timestamp_ns=1_000_000,
                detail="request",
                body=f"[{i}]",
                sequence_number=i,
            )
        )
    model.listener(
        TraceEvent(
            Kind.RECEIVED,
            0,
            name="s",
            message_id="<a39@x>",
            in_reply_to="<q39@x>",
            reception_timestamp_ns=3_500_000,
            detail="response",
            body="ok",
        )
    )
    snap = model.snapshot()
    assert snap["call_count"] == 40 and len(snap["calls"]) == 30
    newest = snap["calls"][0]
    assert newest == {
        "service": "s",
        "status": "answered",
        "latency_ms": 2.5,
        "request_id": "<q39@x>",
        "response_id": "<a39@x>",
        "sequence_number": 39,
        "request": "[39]",
        "response": "ok",
    }
    assert snap["calls"][1]["status"] == "pending" and snap["calls"][1]["latency_ms"] is None


def test_a_paused_monitor_keeps_counting_and_a_stopped_one_says_so() -> None:
    monitor = Monitor.demo(speed=4.0, seed=5, update_hz=20.0)
    try:
        eventually(lambda: monitor.widget.state == "live" and monitor.snapshot.get("topics"))
        monitor.pause()
        eventually(lambda: monitor.widget.state == "paused")
        frozen = monitor.widget.snapshot
        seen = monitor.widget.seen
        eventually(lambda: monitor.widget.seen > seen + 10)  # counted meanwhile
        assert monitor.widget.snapshot is frozen  # what is shown stays
        monitor.resume()
        eventually(lambda: monitor.widget.state == "live")
        eventually(lambda: monitor.widget.snapshot["seen"] > frozen["seen"])
    finally:
        monitor.stop()
    assert monitor.widget.state == "stopped" and monitor.widget.stopped_at
    assert monitor.widget.snapshot["seen"] == monitor.model.seen

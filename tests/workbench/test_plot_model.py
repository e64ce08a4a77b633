"""The plot's model: the series path syntax, the values read from JSON bodies, bounded
ring buffers, a topic's rate, a service's latency, and completion from fields seen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mailbus_workbench.model.plot_paths import (
    PathError,
    SeriesKey,
    SeriesKind,
    format_path,
    numeric_paths,
    parse,
    value_at,
)
from mailbus_workbench.model.series import SeriesStore
from mailbus_workbench.model.state import WorkbenchModel
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_model, message_event, request_event, response_event


@pytest.mark.parametrize(
    ("text", "name", "path"),
    [
        ("robot/pose.x", "robot/pose", ("x",)),
        ("sensors/temperature.celsius", "sensors/temperature", ("celsius",)),
        ("a.b[0].c", "a", ("b", 0, "c")),
        ('lab/cfg["gain.k"].value', "lab/cfg", ("gain.k", "value")),
        ("sensors/level", "sensors/level", ()),
        ("  robot/pose.x ", "robot/pose", ("x",)),
    ],
)
def test_field_paths_parse_and_print_back(text: str, name: str, path: tuple[object, ...]) -> None:
    key = parse(text)
    assert key == SeriesKey(SeriesKind.FIELD, name, path)  # type: ignore[arg-type]
    assert parse(str(key)) == key


def test_a_seen_topic_with_a_dot_in_its_name_is_taken_whole() -> None:
    assert parse("lab/v1.2.x").name == "lab/v1"  # unseen: the first dot ends it
    key = parse("lab/v1.2.x", topics=["lab/v1.2", "lab/v1"])
    assert (key.name, key.path) == ("lab/v1.2", ("x",))


def test_rate_and_latency() -> None:
    assert parse("rate(robot/pose)") == SeriesKey(SeriesKind.RATE, "robot/pose")
    assert parse("latency(demo/add)") == SeriesKey(SeriesKind.LATENCY, "demo/add")
    assert str(parse("latency(demo/add)")) == "latency(demo/add)"
    assert parse("rate(robot/pose)").unit == "msg/s"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "name a series"),
        ("robot/pose.x[", "cannot read the field path"),
        ("robot/pose..x", "cannot read the field path"),
        ('robot/pose["open', "cannot read the field path"),
        ("rate( )", r"rate\(\) needs a topic: rate\(robot/pose\)"),
        ("rate()", r"rate\(\) needs a topic"),
        ("latency()", r"latency\(\) needs a service"),
        ("rate(robot/pose", r"write rate\(topic\)"),
        ("bad\x07name.x", "control character"),
    ],
)
def test_bad_series_get_a_clear_error(text: str, says: str) -> None:
    with pytest.raises(PathError, match=says):
        parse(text)


def test_values_and_numeric_paths() -> None:
    doc = json.loads(
        '{"x": 1, "ok": true, "s": "no", "v": [1.5, {"deep": 2}], "n": null, "inf": 1e999,'
        ' "a.b": 3}'
    )
    assert value_at(doc, ("x",)) == 1.0
    assert value_at(doc, ("ok",)) == 1.0
    assert value_at(doc, ("v", 1, "deep")) == 2.0
    assert value_at(doc, ("s",)) is None
    assert value_at(doc, ("n",)) is None
    assert value_at(doc, ("inf",)) is None  # nothing to draw
    assert value_at(doc, ("v", 5)) is None
    assert value_at(doc, ("x", "y")) is None
    assert value_at(10**400, ()) is None  # beyond any float
    names = ["t" + format_path(p) for p in numeric_paths(doc)]
    assert names == ["t.x", "t.ok", "t.v[0]", "t.v[1].deep", "t.inf", 't["a.b"]']


def test_a_field_series_is_fed_live_and_counts_what_has_no_number() -> None:
    model = WorkbenchModel(clock=FrozenClock())
    series = model.plots.add(parse("robot/pose.x"), model.topics, model.services)
    model.feed_events(
        [
            message_event("robot/pose", '{"x": 1.5}', T0 + 1, 1),
            message_event("robot/pose", '{"y": 2}', T0 + 2, 2),
            message_event("robot/pose", "not json", T0 + 3, 3),
            message_event("robot/pose", '{"x": -2}', T0 + 4, 4),
            message_event("other", '{"x": 9}', T0 + 4, 5),
        ]
    )
    model.pump()
    assert list(series.points) == [(T0 + 1, 1.5), (T0 + 4, -2.0)]
    assert series.missing == 2
    assert series.at(T0 + 3.9) == 1.5  # the value in force
    assert series.at(T0 + 0.5) is None
    assert series.between(T0 + 2, T0 + 5) == [(T0 + 4, -2.0)]


def test_a_new_series_starts_with_the_kept_messages() -> None:
    model = fixed_model(announcements=False)
    held = len(model.topics.history("robot/pose"))
    series = model.plots.add(parse("robot/pose.x"), model.topics, model.services)
    assert len(series.points) == held > 100
    first = json.loads(model.topics.history("robot/pose")[0].body)["x"]
    assert series.points[0][1] == first


def test_points_are_bounded_per_series() -> None:
    model = WorkbenchModel(clock=FrozenClock())
    model.plots = SeriesStore(capacity=50)
    series = model.plots.add(parse("t.v"), model.topics, model.services)
    model.feed_events(message_event("t", f'{{"v": {i}}}', T0 + i / 100, i) for i in range(500))
    model.pump()
    assert len(series.points) == 50
    assert series.points[0][1] == 450 and series.points[-1][1] == 499


def test_the_number_of_series_is_bounded_and_names_are_unique() -> None:
    model = WorkbenchModel()
    plots = SeriesStore(max_series=2)
    plots.add(parse("a.x"), model.topics, model.services)
    with pytest.raises(PathError, match="plotted already"):
        plots.add(parse("a.x"), model.topics, model.services)
    plots.add(parse("rate(a)"), model.topics, model.services)
    with pytest.raises(PathError, match="at most 2 series"):
        plots.add(parse("b.x"), model.topics, model.services)
    plots.remove("a.x")
    with pytest.raises(PathError, match="not plotted"):
        plots.remove("a.x")
    assert [s.name for s in plots] == ["rate(a)"]


def test_rate_counts_messages_per_second_and_zero_when_silent() -> None:
    clock = FrozenClock(T0)
    model = WorkbenchModel(clock=clock)
    series = model.plots.add(parse("rate(t)"), model.topics, model.services)
    # 5 messages in the first second, 2 in the second, then silence.
    times = [0.1, 0.3, 0.5, 0.7, 0.9, 1.2, 1.6]
    model.feed_events(message_event("t", "{}", T0 + t, n) for n, t in enumerate(times))
    clock.now = T0 + 1.7
    model.pump()
    assert list(series.points) == [(T0 + 1, 5.0)]
    clock.now = T0 + 6.5
    model.pump()
    assert list(series.points) == [(T0 + 1, 5.0), (T0 + 2, 2.0), (T0 + 3, 0.0), (T0 + 6, 0.0)]
    assert series.at(T0 + 4.5) == 0.0


def test_latency_of_answered_calls_in_either_order_not_duplicates() -> None:
    model = WorkbenchModel(clock=FrozenClock())
    series = model.plots.add(parse("latency(s)"), model.topics, model.services)
    model.feed_events(
        [
            request_event("s", "[]", T0 + 1, 1, "<r1@x>"),
            response_event("s", "{}", T0 + 1.004, 1, "<a1@x>", "<r1@x>"),
            response_event("s", "{}", T0 + 1.010, 1, "<d1@x>", "<r1@x>"),  # duplicate
            response_event("s", "{}", T0 + 2.050, 2, "<a2@x>", "<r2@x>"),  # before its request
            request_event("s", "[]", T0 + 2.0, 2, "<r2@x>"),
            request_event("s", "[]", T0 + 3, 3, "<r3@x>"),  # pending
        ]
    )
    model.pump()
    assert [(t - T0, round(ms, 3)) for t, ms in series.points] == [
        (pytest.approx(1.004), 4.0),
        (pytest.approx(2.05), 50.0),
    ]
    again = SeriesStore().add(parse("latency(s)"), model.topics, model.services)
    assert list(again.points) == list(series.points)  # the same from the kept calls


def test_completion_offers_fields_seen_rates_and_latencies() -> None:
    model = fixed_model(announcements=False)
    names = model.plots.candidates(model.topics, model.services)
    assert {"robot/pose.x", "robot/pose.theta", "sensors/temperature.celsius"} <= set(names)
    assert "rate(robot/log)" in names and "latency(demo/add)" in names
    assert not any(n.startswith("robot/log.") for n in names)  # plain text bodies


def test_scales_get_their_own_axes_stacked_or_two_a_plot(tmp_path: Path) -> None:
    from mailbus_workbench.model.plot_layout import (
        AxesMode,
        function_problem,
        load_axes_mode,
        panels,
        save_axes_mode,
    )
    from mailbus_workbench.model.plot_paths import parse

    keys = [parse(t) for t in ("robot/pose.x", "sensors/t.c", "robot/pose.y", "rate(a/b)")]
    stacked = [[(0, "left"), (2, "left")], [(1, "left")], [(3, "left")]]
    assert panels(keys, AxesMode.STACKED) == stacked
    assert panels(keys, AxesMode.AXES) == [
        [(0, "left"), (2, "left"), (1, "right")],
        [(3, "left")],
    ]
    assert function_problem("te(robot/pose)") is not None
    assert function_problem("rate(robot/pose)") is None and function_problem("a/b.x") is None
    path = tmp_path / "plot.toml"
    assert load_axes_mode(path) is AxesMode.STACKED
    path.write_text("axes = 'sideways'\n")
    assert load_axes_mode(path) is AxesMode.STACKED  # unreadable: the default, said nowhere
    save_axes_mode(path, AxesMode.AXES)
    assert load_axes_mode(path) is AxesMode.AXES

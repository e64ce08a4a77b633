"""The model without Textual: feed, topic stats and history, service traces, wait sets."""

from __future__ import annotations

import json

import mailbus
import pytest
from mailbus.email_message import from_bytes
from mailbus.trace import Kind, TraceEvent
from mailbus_workbench.model import EventFeed, ServiceStore, TopicStore, TraceStatus
from mailbus_workbench.model.fuzzy import fuzzy_filter, fuzzy_score
from mailbus_workbench.model.inspect import body_diff, header_rows, pretty_body, raw_source
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.model.topics import RATE_HISTORY, TICK_BUDGET, topic_tree
from mailbus_workbench.model.waitsets import WaitSetMonitor
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import (
    discarded_event,
    message_event,
    request_event,
    response_event,
    sample_events,
    sample_wait_sets,
)


def msg(topic: str, t: float, n: int = 1, body: str = "x") -> TraceEvent:
    return message_event(topic, body, t, n)


# -- feed ------------------------------------------------------------------------------
def test_feed_keeps_only_wanted_kinds_in_order() -> None:
    feed = EventFeed(10)
    feed.listener(TraceEvent(Kind.PUBLISHED.value, 1, name="a"))
    feed.listener(msg("a", T0, 1))
    feed.listener(msg("b", T0, 2))
    assert [e.name for e in feed.drain()] == ["a", "b"]
    assert feed.drain() == []


def test_feed_bounded_and_counts_what_it_drops() -> None:
    feed = EventFeed(3)
    for i in range(5):
        feed.listener(msg("a", T0 + i, i))
    assert len(feed) == 3
    assert feed.dropped == 2
    taken = feed.drain(2)
    assert [e.message_id for e in taken] == [msg("a", 0, 2).message_id, msg("a", 0, 3).message_id]
    assert feed.dropped == 2
    with pytest.raises(ValueError):
        EventFeed(0)


def test_feed_cuts_large_bodies_and_leaves_the_shared_event_alone() -> None:
    from mailbus_workbench.model.feed import BODY_KEEP

    feed = EventFeed(10)
    body = "x" * (BODY_KEEP + 500)
    event = TraceEvent(Kind.RECEIVED.value, 1, name="a", body=body, size=len(body))
    feed.listener(event)
    (kept,) = feed.drain()
    assert kept.body is not None and kept.body.startswith("x" * BODY_KEEP)
    assert kept.body.endswith("… 500 more characters") and kept.size == len(body)
    assert event.body == body  # the recorder, listening too, still gets it whole
    small = TraceEvent(Kind.RECEIVED.value, 2, name="a", body="ok", size=2)
    feed.listener(small)
    assert feed.drain() == [small]


# -- topics ----------------------------------------------------------------------------
def test_topic_stats_count_bytes_and_rates() -> None:
    store = TopicStore()
    for i in range(10):
        store.add(message_event("a/b", "12345", T0 + i * 0.1, i))
    stats = store.stats["a/b"]
    assert (stats.count, stats.bytes, stats.last_seen) == (10, 50, pytest.approx(T0 + 0.9))
    store.tick(T0 + 1.0)
    assert stats.rate == 10 and stats.bytes_rate == 50
    store.tick(T0 + 3.5)  # two silent windows
    assert list(stats.rate_history) == [10, 0, 0]
    assert stats.rate == 0


def test_a_window_counts_what_came_within_it_however_late_the_tick() -> None:
    """Messages fed in one batch (a replay, a backlog) after their window ended: each
    window counts its own, not the next one's (it read 3/s for a 4/s topic)."""
    store = TopicStore()
    for i in range(12):  # 4 per second for 3 s, folded at once
        store.add(message_event("a/b", "12345", T0 + i * 0.25, i))
    store.tick(T0 + 3.0)
    stats = store.stats["a/b"]
    assert list(stats.rate_history) == [4, 4, 4] and stats.rate == 4


@pytest.mark.slow
def test_windows_ending_together_close_a_budget_at_a_time_and_exactly() -> None:
    """10,000 topics first seen at once end their windows at once: one tick closes at
    most TICK_BUDGET of them (closing all held a key 30 ms); the next ticks close the
    rest, each with the rate of its own window."""
    store = TopicStore()
    names = [f"t/{n}" for n in range(5 * TICK_BUDGET // 2)]
    for n, name in enumerate(names):
        store.add(message_event(name, "1", T0, n))
        store.add(message_event(name, "1", T0 + 0.5, n))
    store.tick(T0 + 1.0)
    closed = [name for name in names if store.stats[name].rate_history]
    assert len(closed) == TICK_BUDGET
    store.tick(T0 + 1.1)
    store.tick(T0 + 1.2)
    assert all(list(store.stats[name].rate_history) == [2] for name in names)


def test_rate_history_is_bounded() -> None:
    store = TopicStore()
    store.add(msg("a", T0))
    store.tick(T0 + 10 * RATE_HISTORY)
    assert len(store.stats["a"].rate_history) == RATE_HISTORY


def test_history_cap_per_topic_and_changing_it() -> None:
    store = TopicStore(history_cap=3)
    for i in range(1, 6):
        store.add(msg("a", T0 + i, i))
    store.add(msg("b", T0, 9))
    assert [r.number for r in store.history("a")] == [3, 4, 5]
    assert store.stats["a"].count == 5
    store.history_cap = 2
    assert [r.number for r in store.history("a")] == [4, 5]
    assert store.held() == 3
    for bad in (0, -1, 10**9):
        with pytest.raises(ValueError):
            store.history_cap = bad
    assert store.history_cap == 2


def test_previous_message_and_clear() -> None:
    store = TopicStore()
    for i in range(3):
        store.add(msg("a", T0 + i, i, body=str(i)))
    assert store.previous("a", 3) is not None and store.previous("a", 3).body == "1"
    assert store.previous("a", 1) is None
    store.clear("a")
    assert "a" not in store.stats and store.history("a") == []
    store.add(msg("b", T0))
    store.clear()
    assert store.total == 0 and not store.stats


def test_max_topics_bounds_memory() -> None:
    store = TopicStore(max_topics=2)
    for i, name in enumerate(["a", "b", "c", "c"]):
        store.add(msg(name, T0 + i, i))
    assert sorted(store.stats) == ["a", "b"]
    assert store.untracked == 2


def test_topic_tree_groups_by_slash() -> None:
    tree = topic_tree(["robot/pose", "robot/log", "robot", "/abs/x", "single"])
    labels = [n.label for n in tree]
    assert labels == ["abs", "robot", "single"]
    robot = tree[1]
    assert robot.topic == "robot"  # a prefix that is also a topic
    assert [(c.label, c.topic) for c in robot.children] == [
        ("log", "robot/log"),
        ("pose", "robot/pose"),
    ]
    assert tree[0].children[0].topic == "/abs/x"  # the real name, leading slash kept


def test_fuzzy_filter() -> None:
    names = ["robot/pose", "robot/log", "sensors/temperature", "system/heartbeat"]
    assert fuzzy_filter("rbps", names) == ["robot/pose"]
    assert fuzzy_filter("temp", names) == ["sensors/temperature"]
    assert fuzzy_filter("", names) == sorted(names)
    assert fuzzy_filter("zzz", names) == []
    assert fuzzy_score("log", "robot/log") > fuzzy_score("log", "lxoxgx")  # type: ignore[operator]


# -- services --------------------------------------------------------------------------
def test_service_pairing_statuses_and_latency() -> None:
    store = ServiceStore(timeout_s=1.0)
    store.add(request_event("s", "[1]", T0, 1, "<r1@x>"))
    store.add(response_event("s", "1", T0 + 0.25, 1, "<p1@x>", "<r1@x>"))
    store.add(request_event("s", "[2]", T0 + 1, 2, "<r2@x>"))
    store.add(response_event("s", "0", T0 + 1.1, 7, "<p7@x>", "<unknown@x>"))
    store.add(response_event("s", "1", T0 + 0.3, 1, "<p1b@x>", "<r1@x>"))
    traces = store.traces()
    by_key = {t.key: t for t in traces}
    answered = by_key["<r1@x>"]
    assert answered.status(T0 + 5, 1.0) is TraceStatus.ANSWERED
    assert answered.latency_s == pytest.approx(0.25)
    assert answered.duplicates == 1
    assert by_key["<r2@x>"].status(T0 + 1.5, 1.0) is TraceStatus.PENDING
    assert by_key["<r2@x>"].status(T0 + 2.0, 1.0) is TraceStatus.TIMED_OUT
    statuses = [t.status(T0 + 5, 1.0) for t in traces]
    assert statuses.count(TraceStatus.ORPHANED) == 1
    assert statuses.count(TraceStatus.DUPLICATE) == 1
    assert store.counts(T0 + 5)[TraceStatus.TIMED_OUT] == 1


def test_response_seen_before_its_request_is_paired_when_the_request_comes() -> None:
    store = ServiceStore(timeout_s=1.0)
    store.add(response_event("s", "1", T0 + 0.2, 1, "<p1@x>", "<r1@x>"))
    assert store.traces()[0].status(T0 + 0.2, 1.0) is TraceStatus.ORPHANED
    store.add(request_event("s", "[1]", T0 + 0.3, 1, "<r1@x>"))
    (trace,) = store.traces()
    assert trace.key == "<r1@x>" and trace.status(T0 + 5, 1.0) is TraceStatus.ANSWERED
    assert trace.response is not None and trace.response.message_id == "<p1@x>"
    assert trace.latency_s == 0.0  # the clock saw them the wrong way round
    store.add(response_event("s", "1", T0 + 0.4, 1, "<p1b@x>", "<r1@x>"))
    assert [t.status(T0 + 5, 1.0) for t in store.traces()] == [
        TraceStatus.ANSWERED,
        TraceStatus.DUPLICATE,
    ]


def test_an_evicted_orphan_is_forgotten() -> None:
    store = ServiceStore(max_traces=2)
    store.add(response_event("s", "", T0, 9, "<p9@x>", "<r9@x>"))
    store.add(request_event("s", "", T0 + 1, 1, "<r1@x>"))
    store.add(request_event("s", "", T0 + 2, 2, "<r2@x>"))  # evicts the orphan
    store.add(request_event("s", "", T0 + 3, 9, "<r9@x>"))
    assert store.get("<r9@x>") is not None and store.get("<r9@x>").response is None  # type: ignore[union-attr]
    assert len(store) == 2


def test_late_response_turns_timed_out_into_answered() -> None:
    store = ServiceStore(timeout_s=0.5)
    store.add(request_event("s", "", T0, 1, "<r@x>"))
    assert store.traces()[0].status(T0 + 1, 0.5) is TraceStatus.TIMED_OUT
    store.add(response_event("s", "", T0 + 2, 1, "<p@x>", "<r@x>"))
    assert store.traces()[0].status(T0 + 3, 0.5) is TraceStatus.ANSWERED


def test_a_response_the_client_discarded_makes_its_call_late() -> None:
    """As the analysis says: answered after the client gave up is "late", whether the
    client's discard is seen after the response, before it, or before the request."""
    store = ServiceStore(timeout_s=0.5)
    store.add(request_event("s", "", T0, 1, "<r1@x>"))
    store.add(response_event("s", "", T0 + 0.7, 1, "<p1@x>", "<r1@x>"))
    assert store.get("<r1@x>").status(T0 + 1, 0.5) is TraceStatus.ANSWERED  # type: ignore[union-attr]
    version = store.version
    store.add(discarded_event("s", T0 + 0.71, 1, "<p1@x>", "<r1@x>"))
    assert store.get("<r1@x>").status(T0 + 1, 0.5) is TraceStatus.LATE  # type: ignore[union-attr]
    assert store.version > version  # the view redraws
    # The discard first (an observer may see the client's event before the email).
    store.add(discarded_event("s", T0 + 2, 2, "<p2@x>", "<r2@x>"))
    store.add(request_event("s", "", T0 + 1, 2, "<r2@x>"))
    store.add(response_event("s", "", T0 + 2, 2, "<p2@x>", "<r2@x>"))
    assert store.get("<r2@x>").status(T0 + 3, 0.5) is TraceStatus.LATE  # type: ignore[union-attr]
    counts = store.counts(T0 + 3)
    assert counts[TraceStatus.LATE] == 2 and counts[TraceStatus.ANSWERED] == 0
    # Through the model: the discard is a Log notice and marks the call.
    model = WorkbenchModel(clock=FrozenClock(T0 + 5))
    model.feed_events(
        [
            request_event("s", "", T0, 1, "<r@x>"),
            response_event("s", "", T0 + 1, 1, "<p@x>", "<r@x>"),
            discarded_event("s", T0 + 1, 1, "<p@x>", "<r@x>"),
        ]
    )
    model.pump()
    assert model.services.counts(T0 + 5)[TraceStatus.LATE] == 1
    assert [e.kind for e in model.notices] == [Kind.DISCARDED.value]


def test_redelivered_request_is_kept_once_and_store_is_bounded() -> None:
    store = ServiceStore(max_traces=3)
    store.add(request_event("s", "", T0, 1, "<r1@x>"))
    store.add(request_event("s", "", T0 + 0.1, 1, "<r1@x>"))
    assert len(store) == 1
    for i in range(2, 7):
        store.add(request_event("s", "", T0 + i, i, f"<r{i}@x>"))
    assert [t.sequence for t in store.traces()] == [4, 5, 6]
    # A response to an evicted request is an orphan now: visible, not lost.
    store.add(response_event("s", "", T0 + 9, 1, "<p1@x>", "<r1@x>"))
    assert store.traces()[-1].status(T0 + 9, 2.0) is TraceStatus.ORPHANED
    with pytest.raises(ValueError):
        ServiceStore(max_traces=0)
    with pytest.raises(ValueError):
        ServiceStore(timeout_s=0)


def test_sample_events_cover_every_status() -> None:
    model = WorkbenchModel(clock=FrozenClock(T0 + 12))
    model.feed_events(sample_events())
    model.pump()
    counts = model.services.counts(T0 + 12)
    assert all(counts[s] > 0 for s in TraceStatus), counts
    assert sorted(model.topics.stats) == [
        "robot/log",
        "robot/pose",
        "sensors/temperature",
        "system/heartbeat",
    ]


# -- inspector helpers -----------------------------------------------------------------
def test_pretty_body() -> None:
    assert pretty_body('{"a":1,"b":[1,2]}') == (
        True,
        '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}',
    )
    assert pretty_body("INFO hello") == (False, "INFO hello")
    assert pretty_body("{not json") == (False, "{not json")
    assert pretty_body("42")[0] is True


def test_pretty_body_survives_hostile_json() -> None:
    deep = "[" * 5000 + "]" * 5000  # json.loads raises RecursionError on this
    assert pretty_body(deep) == (False, deep)
    huge = '{"a": "' + "x" * (300 * 1024) + '"}'
    assert pretty_body(huge) == (False, huge)  # too large to pretty-print on the UI loop
    is_json, text = pretty_body('{"csi": "a\u009bb", "del": "\u007f"}')
    assert is_json and "\x9b" not in text and "\x7f" not in text
    assert json.loads(text) == {"csi": "a\x9bb", "del": "\x7f"}  # still the same JSON


def test_header_rows_show_the_whole_references_chain() -> None:
    event = response_event("demo/add", "{}", T0, 3, "<p3@x>", "<r3@x>")
    event.references = ("<r1@x>", "<r3@x>")
    assert dict(header_rows(event))["References"] == "<r1@x> <r3@x>"
    assert "References: <r1@x> <r3@x>" in raw_source(event)


def test_raw_source_is_an_email_mailbus_can_read_back() -> None:
    event = response_event("demo/add", '{"sum": 6}', T0, 3, "<p3@x>", "<r3@x>")
    raw = raw_source(event, "Fri, 15 Jan 2027 08:00:12 GMT")
    assert "In-Reply-To: <r3@x>" in raw and "Request-Sequence-Number: 3" in raw
    email = from_bytes(raw.replace("\n", "\r\n").encode())
    assert (email.subject, email.body, email.in_reply_to) == ("demo/add", '{"sum": 6}', "<r3@x>")
    names = [name for name, _ in header_rows(event)]
    assert names[:4] == ["Subject", "Message-ID", "In-Reply-To", "References"]


def test_raw_source_shows_the_addresses_the_event_carries() -> None:
    event = response_event("demo/add", "{}", T0, 3, "<p3@x>", "<r3@x>")
    event.extra = {"from": "robot@lab.org", "to": ["ops@lab.org"], "cc": ["bad address"]}
    raw = raw_source(event)
    assert "From: robot@lab.org" in raw and "To: ops@lab.org" in raw
    assert "bad address" not in raw and "Cc:" not in raw  # dropped, the rest still shown
    event.extra = {}
    assert "From: mailbus@localhost" in raw_source(event)  # older recordings


def test_raw_source_reports_what_cannot_be_built() -> None:
    bad = TraceEvent(Kind.RECEIVED.value, 1, name="a\r\nBcc: x", body="", detail="message")
    assert raw_source(bad).startswith("(cannot build the RFC 5322 source")


def test_body_diff() -> None:
    diff = body_diff('{"a": 1, "b": 2}', '{"a": 1, "b": 3}')
    assert '-  "b": 2' in diff and '+  "b": 3' in diff
    assert body_diff("same", "same") == "(identical to the previous message)"
    assert body_diff(None, "x").startswith("(no previous")


# -- wait sets -------------------------------------------------------------------------
def test_wait_set_monitor_on_a_real_wait_set() -> None:
    with mailbus.Context() as ctx:
        sub = ctx.subscription("t")
        wait_set = ctx.wait_set("main")
        wait_set.add_subscription(sub)
        monitor = WaitSetMonitor(lambda: ctx.wait_sets)
        monitor.sample(0)
        assert not wait_set.wait(0)  # a time-out
        monitor.sample(0)
        ctx.publisher("t").publish("x")
        assert mailbus.wait_for_message(ctx.subscription("u"), 0) is None
        assert wait_set.wait(2.0).subscriptions == (sub,)
        monitor.sample(0)
        (row,) = monitor.ordered()
        assert row.name == "main"
        assert [(e.kind, e.name) for e in row.entities] == [("subscription", "t")]
        assert (row.waits, row.timeouts) == (2, 1)
        assert "".join(row.timeline) == ".tr"
        wait_set.close()
        monitor.sample(0)
        assert monitor.ordered() == []


def test_wait_set_monitor_on_fixed_wait_sets() -> None:
    sets = sample_wait_sets()
    monitor = WaitSetMonitor(lambda: sets)
    monitor.sample(int((T0 + 12) * 1e9))
    rows = {r.name: r for r in monitor.ordered()}
    assert rows["demo/server"].waiting and rows["demo/server"].waiting_for_s == pytest.approx(
        0.05, abs=1e-3
    )
    assert sum(e.ready for e in rows["controller"].entities) == 1


# -- the whole model against the real engine ------------------------------------------
def test_model_follows_a_real_context_and_pause_keeps_counting() -> None:
    model = WorkbenchModel()
    with mailbus.Context() as ctx:
        ctx.tracer.add_listener(model.feed.listener)
        publisher = ctx.publisher("sensors/x")
        sub = ctx.subscription("sensors/x")
        for i in range(5):
            publisher.publish(json.dumps({"i": i}))
        for _ in range(5):  # delivered means the polling thread traced them already
            assert mailbus.wait_for_message(sub, 2.0) is not None
        model.pump()
        assert model.topics.stats["sensors/x"].count == 5
        model.set_paused(True)
        publisher.publish("{}")
        assert mailbus.wait_for_message(sub, 2.0) is not None
        model.pump()
        assert model.topics.stats["sensors/x"].count == 6
        assert len(model.topics.history("sensors/x")) == 6  # kept while paused
        assert model.new_while_paused == 1
        other = ctx.publisher("sensors/y")
        other_sub = ctx.subscription("sensors/y")
        for _ in range(3):
            other.publish("{}")
            assert mailbus.wait_for_message(other_sub, 2.0) is not None
        model.pump()
        assert model.new_by_topic == {"sensors/x": 1, "sensors/y": 3}
        assert model.new_while_paused == 4 and model.dropped_while_paused() == 0
        model.set_paused(False)
        assert model.new_while_paused == 0 and not model.new_by_topic


def test_header_rows_show_the_signature_status_when_the_event_has_one() -> None:
    event = response_event("demo/add", "{}", T0, 3, "<p3@x>", "<r3@x>")
    assert "Signature" not in dict(header_rows(event))
    event.extra = {"signature": "failed: body hash mismatch (the body was changed)"}
    rows = header_rows(event)
    assert ("Signature", "failed: body hash mismatch (the body was changed)") in rows
    assert [name for name, _ in rows].count("Signature") == 1


def test_the_timeline_bins_rows_per_name_and_maps_columns_to_offsets() -> None:
    """Bounded per-name density rows (the rest summed in `other`) and the column <->
    offset mapping the timeline bar seeks with."""
    from mailbus_workbench.model.timeline import (
        BINS,
        OTHER,
        build_timeline,
        column_of,
        offset_at,
        resample,
        stepped,
    )

    second = 1_000_000_000
    emails = [("a", i * second // 10) for i in range(41)]  # 4 s of `a` at 10 Hz
    emails += [("b", 2 * second), ("c", 3 * second), ("d", 4 * second)]
    timeline = build_timeline(emails, max_rows=3)
    assert timeline.duration_s == 4.0 and timeline.total == len(emails)
    assert [row.name for row in timeline.rows] == ["a", "b", OTHER]
    assert [row.count for row in timeline.rows] == [41, 1, 2]
    assert all(len(row.bins) == BINS for row in timeline.rows)
    assert timeline.rows[0].bins[0] == 1 and timeline.rows[0].bins[-1] == 1
    assert sum(resample(timeline.rows[0].bins, 7)) == 41  # nothing lost or counted twice
    assert resample(timeline.rows[1].bins, 5) == [0, 0, 1, 0, 0]
    assert column_of(0.0, 4.0, 101) == 0 and column_of(4.0, 4.0, 101) == 100
    assert column_of(2.0, 4.0, 101) == 50 and column_of(9.0, 4.0, 101) == 100
    assert offset_at(50, 4.0, 101) == 2.0 and offset_at(-3, 4.0, 101) == 0.0
    assert offset_at(500, 4.0, 101) == 4.0
    assert stepped(3.9, 4.0, 0.1) == 4.0 and stepped(0.1, 4.0, -0.1) == 0.0
    empty = build_timeline([])
    assert empty.duration_s == 0.0 and empty.rows == ()
    assert column_of(1.0, 0.0, 50) == 0 and offset_at(10, 0.0, 50) == 0.0

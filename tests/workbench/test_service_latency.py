"""Latency percentiles and histogram per service, the Services filter and the
waterfall's labels, on fixed data."""

from __future__ import annotations

import pytest
from mailbus_workbench.model import latency, trace_filter
from mailbus_workbench.model.latency import LatencyBook, bucket_bounds, bucket_of, percentile
from mailbus_workbench.model.pacing import PUMP_LIMIT, FoldPacer
from mailbus_workbench.model.services import ServiceStore, TraceStatus
from mailbus_workbench.widgets.format import elide_middle
from mailbus_workbench.widgets.waterfall import render_waterfall
from workbench_fixtures.clock import T0
from workbench_fixtures.events import request_event, response_event


def call(store: ServiceStore, service: str, seq: int, t: float, latency_s: float) -> None:
    mid = f"<{service}-{seq}@x>"
    store.add(request_event(service, "[]", t, seq, mid))
    store.add(response_event(service, "{}", t + latency_s, seq, f"<r{seq}@x>", mid))


def test_percentiles_are_nearest_rank_on_fixed_data() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.9) == 90.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([1.0, 2.0, 3.0], 0.5) == 2.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)
    with pytest.raises(ValueError, match="q must be"):
        percentile([1.0], 0)


def test_the_store_summarises_each_service_from_its_answered_calls() -> None:
    store = ServiceStore()
    for n in range(1, 11):  # 1..10 ms
        call(store, "demo/add", n, T0 + n, n / 1000)
    call(store, "demo/mul", 1, T0, 0.5)
    store.add(request_event("demo/add", "[]", T0 + 20, 99, "<unanswered@x>"))
    add = store.latencies.summary("demo/add")
    assert add is not None
    assert add.calls == 10  # the unanswered call has no latency
    assert (add.p50_s, add.p90_s, add.p99_s, add.max_s) == pytest.approx(
        (0.005, 0.009, 0.010, 0.010), abs=1e-6
    )
    assert [s.service for s in store.latencies.summaries()] == ["demo/add", "demo/mul"]
    store.clear()
    assert store.latencies.summaries() == []


def test_a_response_before_its_request_and_a_duplicate_count_once() -> None:
    store = ServiceStore()
    store.add(response_event("s", "{}", T0 + 0.003, 1, "<r1@x>", "<q1@x>"))
    store.add(request_event("s", "[]", T0, 1, "<q1@x>"))
    store.add(response_event("s", "{}", T0 + 0.004, 1, "<r1b@x>", "<q1@x>"))  # duplicate
    summary = store.latencies.summary("s")
    assert summary is not None
    assert summary.calls == 1
    assert summary.p50_s == pytest.approx(0.003, abs=1e-6)


def test_memory_is_bounded_by_a_ring_per_service_and_a_number_of_services() -> None:
    book = LatencyBook()
    for n in range(latency.RECENT + 500):
        book.add("s", float(n))
    entry = book.get("s")
    assert entry is not None
    assert len(entry.recent()) == latency.RECENT
    assert min(entry.recent()) == 500.0  # the oldest were overwritten
    summary = book.summary("s")
    assert summary is not None and summary.calls == latency.RECENT + 500
    for n in range(latency.MAX_SERVICES + 3):
        book.add(f"svc{n}", 0.001)
    assert len(book) == latency.MAX_SERVICES
    assert book.get("s") is None and book.get("svc0") is None  # least recent went first
    book.add("bad", float("nan"))
    book.add("bad", -1.0)
    assert book.get("bad") is None


def test_histogram_buckets_are_log_spaced_with_exact_bounds() -> None:
    bounds = bucket_bounds()
    assert len(bounds) == latency.BUCKET_COUNT
    assert bounds[latency.BUCKETS_PER_DECADE - 1] == pytest.approx(1e-4)
    assert bucket_of(1e-6) == 0  # below the lowest: the first bucket
    assert bucket_of(1e-4) == 3  # a bound belongs to the bucket it closes
    assert bucket_of(1.01e-4) == 4
    assert bucket_of(1e3) == latency.BUCKET_COUNT - 1  # above the highest: the last
    book = LatencyBook()
    for value in (0.001, 0.001, 0.0015, 0.2):
        book.add("s", value)
    entry = book.get("s")
    assert entry is not None
    counts = entry.histogram()
    assert counts[bucket_of(0.001)] == 2
    assert counts[bucket_of(0.0015)] == 1
    assert counts[bucket_of(0.2)] == 1
    assert sum(counts) == 4


def test_the_filter_reads_service_client_status_and_headers() -> None:
    store = ServiceStore(timeout_s=1.0)
    call(store, "robot/arm/move", 1, T0, 0.002)
    call(store, "demo/add", 2, T0, 0.002)
    store.add(request_event("demo/add", "[]", T0, 3, "<pending@x>"))
    now = T0 + 0.5
    traces = store.traces()

    def listed(text: str) -> list[int]:
        wanted = trace_filter.parse(text)
        return [t.sequence for t in traces if wanted.matches(t, t.status(now, 1.0))]

    assert listed("") == [1, 2, 3]
    assert listed("arm") == [1]
    assert listed("service=demo/add") == [2, 3]
    assert listed("service=demo") == []  # = is the whole name
    assert listed("service~ADD") == [2, 3]
    assert listed("client=c1c1") == [1, 2, 3]  # the start of the GID
    assert listed("client=d2d2") == []
    assert listed("client~d2d2") == [1, 2, 3]
    assert listed("status=pending") == [3]
    assert listed("demo status=answered") == [2]
    assert listed("Request-Sequence-Number=2") == [2]
    assert listed("service=") == [1, 2, 3]  # still being typed
    assert trace_filter.parse("status=timed-out").statuses == {TraceStatus.TIMED_OUT}
    with pytest.raises(trace_filter.FilterError, match="unknown status 'lost'"):
        trace_filter.parse("status=lost")


def test_elide_middle_keeps_both_ends() -> None:
    assert elide_middle("robot/arm/left/move", 11) == "robot…/move"
    assert elide_middle("short", 11) == "short"
    assert len(elide_middle("x" * 50, 7)) == 7


@pytest.mark.parametrize("width", [40, 60, 120])
def test_waterfall_labels_are_never_cut(width: int) -> None:
    store = ServiceStore()
    long_name = "fleet/robot-0042/arm/left/gripper/close"
    call(store, long_name, 12345, T0, 0.002)
    call(store, "demo/add", 7, T0 + 1, 0.002)
    lines = render_waterfall(store.traces(), 1.0, T0 + 2, width, 10).plain.splitlines()
    assert all(len(line) <= width for line in lines)
    assert any(line.strip().startswith("demo/add#7 ") for line in lines)
    label = next(line for line in lines if "#12345" in line).split(" ")[0]
    if width >= 2 * len(long_name) + 12:
        assert label == f"{long_name}#12345"  # room: the whole name
    else:  # elided in the middle, both ends and the whole call number kept
        assert label.startswith("fleet/") and "…" in label and label.endswith("close#12345")


def test_the_pacer_folds_about_its_budget_in_slices() -> None:
    pacer = FoldPacer(budget_s=0.010, ceiling=20_000, floor=500)
    assert pacer.limit() == 500  # no rate measured yet: a small first fold measures it
    pacer.folded(10_000, 0.100)  # 100k events/s: 10 ms is 1,000 events
    assert pacer.limit() == 1_000
    # A fold stopped by its limit with events left is followed by another slice at once.
    assert pacer.another_slice(asked=1_000, taken=1_000, left=50_000)
    assert not pacer.another_slice(asked=1_000, taken=400, left=3)  # it took all there was
    assert not pacer.another_slice(asked=1_000, taken=1_000, left=0)
    pacer.folded(100, 1.0)  # too few events to measure: the limit stays
    assert pacer.limit() == 1_000
    pacer.folded(600, 60.0)  # very slow: never under the floor
    assert pacer.limit() == 500
    pacer.folded(20_000, 0.001)  # very fast: never over the ceiling
    assert pacer.limit() == 20_000
    fixed = FoldPacer(budget_s=None)  # a fixed ceiling, no slices
    fixed.folded(10_000, 0.100)
    assert fixed.limit() == PUMP_LIMIT
    assert not fixed.another_slice(asked=PUMP_LIMIT, taken=PUMP_LIMIT, left=50_000)
    with pytest.raises(ValueError, match="floor"):
        FoldPacer(floor=0)
    with pytest.raises(ValueError, match="budget"):
        FoldPacer(budget_s=0)


def test_a_control_character_in_a_service_name_is_drawn_not_sent() -> None:
    store = ServiceStore()
    call(store, "evil\x1b[2Jname", 1, T0, 0.001)
    text = render_waterfall(store.traces(), 1.0, T0 + 1, 80, 5).plain
    assert "\x1b" not in text and "evil␛[2Jname#1" in text

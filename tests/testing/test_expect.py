"""Expectations: what passes, and what each failure says (nearest misses with their
field-by-field diff, the timeline), from inner test files run with pytester."""

from __future__ import annotations

import pytest
from inner import run


@pytest.mark.slow
def test_a_met_expectation_passes(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_reading(bus, expect):
    seen = expect.topic("sensors/temp", where={"celsius": 21.5}, count=2, within=2.0)
    pub = bus.publisher("sensors/temp")
    pub.publish(json.dumps({"celsius": 20.0}))
    pub.publish(json.dumps({"celsius": 21.5}))
    pub.publish(json.dumps({"celsius": 21.5}))
    assert [m.doc["celsius"] for m in seen.wait().matches] == [21.5, 21.5]
""",
    )
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_a_missed_topic_shows_nearest_misses_with_a_field_diff(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_reading(bus, expect):
    expect.topic("sensors/temp", where={"celsius": 30, "unit": "C"}, within=0.5)
    pub = bus.publisher("sensors/temp")
    pub.publish(json.dumps({"celsius": 21.5, "unit": "C"}))
    pub.publish(json.dumps({"celsius": 19, "unit": "F"}))
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected 1 message on 'sensors/temp' where celsius == 30, unit == \"C\" "
            "within 0.5 s: 0 matched of 2 received",
            "*nearest misses (closest first):",
            '*message {"celsius": 21.5, "unit": "C"}',
            "*celsius: expected 30, got 21.5",
            '*message {"celsius": 19, "unit": "F"}',
            "*celsius: expected 30, got 19",
            '*unit: expected "C", got "F"',
            "*timeline (2 arrived, 0 matched):",
            '*miss   message sensors/temp  {"celsius": 21.5*',
        ]
    )


@pytest.mark.slow
def test_a_missing_field_is_named_and_a_callable_is_described(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def hot(message):
    return (message.doc or {}).get("celsius", 0) > 50

def test_fields(bus, expect):
    expect.topic("a", where={"pose.x": 1.0}, within=0.3)
    expect.topic("b", where=hot, within=0.3)
    bus.publisher("a").publish(json.dumps({"pose": {"y": 2}}))
    bus.publisher("b").publish("not json")
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected 1 message on 'a' where pose.x == 1.0 within 0.3 s: 0 matched of 1 received",
            "*pose.x: expected 1.0, got (missing)",
            "*expected 1 message on 'b' where hot(message) within 0.3 s: 0 matched of 1 received",
            "*does not satisfy hot(message)",
        ]
    )


@pytest.mark.slow
def test_nothing_arrived_says_so(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_silent(bus, expect):
    expect.topic("quiet", count=3, within=0.2)
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected 3 messages on 'quiet' within 0.2 s: 0 matched of 0 received",
            "*timeline: nothing arrived",
        ]
    )


@pytest.mark.slow
def test_never_fails_on_a_matching_message_and_shows_it(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_no_alarm(bus, expect):
    expect.never("alarms", where={"level": "high"}, during=0.3)
    bus.publisher("alarms").publish(json.dumps({"level": "low"}))
    bus.publisher("alarms").publish(json.dumps({"level": "high"}))

def test_no_alarm_passes(bus, expect):
    expect.never("alarms", where={"level": "high"}, during=0.2)
    bus.publisher("alarms").publish(json.dumps({"level": "low"}))
""",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected no message on 'alarms' where level == \"high\" for 0.3 s: 1 arrived, "
            "the first at +*",
            "*timeline (2 arrived, 1 matched):",
            '*match  message alarms  {"level": "high"}',
        ]
    )


@pytest.mark.slow
def test_ordered_reports_the_message_out_of_order(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_order(bus, expect, faults):
    expect.topic("seq", count=4, within=2.0, ordered=True)
    faults(seed=3, reorder=1.0)
    pub = bus.publisher("seq")
    for i in range(4):
        pub.publish(str(i))
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected 4 messages on 'seq' within 2.0 s, in order: out of order: message 1 "
            "of publisher * came after 2",
            "*mailbus faults*",
            "faults(seed=3, reorder=1.0)",
            "rerun with --mailbus-seed=3",
        ]
    )


@pytest.mark.slow
def test_rate_measures_and_reports(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import threading

def ticker(ctx, stop):
    pub = ctx.publisher("tick")
    while not stop.wait(0.05):
        pub.publish("t")

def test_rate_ok(bus, expect, system):
    rate = expect.rate("tick", hz=20, tolerance=0.5, during=1.0)
    system.start(ticker, ready=["publisher:tick"])
    rate.wait()
    assert 10 <= rate.measured <= 30

def test_rate_wrong(bus, expect, system):
    expect.rate("tick", hz=100, tolerance=0.1, during=0.6)
    system.start(ticker, ready=["publisher:tick"])
""",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*expected 100 Hz ± 10% on 'tick' over 0.6 s: measured * Hz from * messages"]
    )


@pytest.mark.slow
def test_bad_arguments_are_refused_clearly(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_count(expect):
    with pytest.raises(ValueError, match="count must be at least 1"):
        expect.topic("a", count=0)
    with pytest.raises(TypeError, match="where= takes a query string, a mapping"):
        expect.topic("a", where=42)
    with pytest.raises(ValueError, match="within must be above 0"):
        expect.topic("a", within=0)
""",
    )
    result.assert_outcomes(passed=1)


SERVICE = """
def doubler(ctx, stop):
    server = ctx.server("double")
    while not stop.is_set():
        request = mailbus.wait_for_request(server, 0.05)
        if request is not None:
            n = json.loads(request.body)["n"]
            server.send_response(request, json.dumps({"n": n, "twice": n * 2}))

def silent(ctx, stop):
    server = ctx.server("silent")
    while not stop.wait(0.05):
        pass
"""


@pytest.mark.slow
def test_service_expectations_report_what_went_wrong(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        SERVICE
        + """
def test_answers(bus, expect, system):
    system.start(doubler, ready=["server:double"])
    calls = expect.service("double").answered(2).responds(where={"twice": 6}).latency(p95=5)
    client = bus.client("double")
    client.call(json.dumps({"n": 3}), timeout=5)
    client.call(json.dumps({"n": 4}), timeout=5)

def test_unanswered(bus, expect, system):
    system.start(silent, ready=["server:silent"])
    expect.service("silent").answered(1, within=0.3)
    bus.client("silent").send_request("hello")

def test_slow(bus, expect, system):
    system.start(doubler, ready=["server:double"])
    expect.service("double").latency(p95=0.000001)
    bus.client("double").call(json.dumps({"n": 1}), timeout=5)

def test_fine(bus, expect, system):
    system.start(doubler, ready=["server:double"])
    calls = expect.service("double").answered(1).responds(where={"twice": 2})
    bus.client("double").call(json.dumps({"n": 1}), timeout=5)
    calls.wait()
    assert calls.observed_p95() is not None
""",
    )
    result.assert_outcomes(failed=3, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected service 'double' to answer 2 request(s) within 5.0 s, every response "
            "where twice == 6, p95 latency <= 5 s: 1 of 2 responses did not match",
            "*nearest misses (closest first):",
            '*response {"n": 4, "twice": 8}',
            "*twice: expected 6, got 8",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*expected service 'silent' to answer 1 request(s) within 0.3 s: 0 answered of "
            "1 requests seen",
            "*timeline (1 arrived, 0 matched):",
            "*call   request silent  hello",
        ]
    )
    result.stdout.fnmatch_lines(["*p95 latency <= 1e-06 s: p95 latency was * s over 1 calls"])


@pytest.mark.slow
def test_an_async_test_awaits_its_expectation(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import asyncio

@pytest.mark.asyncio
async def test_awaited(bus, expect):
    seen = expect.topic("t", where={"n": 2})
    bus.publisher("t").publish(json.dumps({"n": 2}))
    done = await seen
    assert done.matches[0].doc == {"n": 2}

@pytest.mark.asyncio
async def test_awaited_failure(bus, expect):
    seen = expect.topic("t", where={"n": 2}, within=0.2)
    bus.publisher("t").publish(json.dumps({"n": 1}))
    await asyncio.sleep(0)  # the loop stays free while the expectation waits
    await seen
""",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*n: expected 2, got 1"])


@pytest.mark.slow
def test_a_query_where_reports_each_failed_condition(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_query(bus, expect):
    expect.topic("sensors/temp", where="celsius>25 unit=C", within=0.5)
    pub = bus.publisher("sensors/temp")
    pub.publish(json.dumps({"celsius": 21.5, "unit": "C"}))
    pub.publish(json.dumps({"celsius": 19, "unit": "F"}))

def test_query_passes(bus, expect):
    seen = expect.topic("sensors/temp", where="celsius>25 items[0].id=7", within=2)
    bus.publisher("sensors/temp").publish(json.dumps({"celsius": 30, "items": [{"id": 7}]}))
    assert seen.wait().matches[0].doc["celsius"] == 30

def test_bad_query(expect):
    with pytest.raises(ValueError, match="an empty query"):
        expect.topic("t", where="  ")
""",
    )
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        [
            "*expected 1 message on 'sensors/temp' where celsius>25 unit=C within 0.5 s: "
            "0 matched of 2 received",
            "*nearest misses (closest first):",
            '*message {"celsius": 21.5, "unit": "C"}',
            "*celsius: expected > 25, got 21.5",
            '*message {"celsius": 19, "unit": "F"}',
            "*celsius: expected > 25, got 19",
            '*unit: expected = c, got "F"',
        ]
    )

"""The kit as a developer finds it testing a system of their own written from scratch: a
parking-lot gate (parking_lot.py) that publishes `lot/free` in answer to cars entering
and leaving, and serves `lot/fee`. Each test runs inner test files with pytester, as a
user's run does (issue 36, items 8-10)."""

from __future__ import annotations

import json
import shutil
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import mailbus
import parking_lot
import pytest
from inner import run
from mailbus.sessions.recorder import Recorder
from waiting import eventually

GATE = Path(parking_lot.__file__)
STARTED = 'system.start("parking_lot.py", ready=["server:lot/fee"])'


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session recorded as the user did: two cars in, two fees asked, one car out."""
    directory = tmp_path_factory.mktemp("parking") / "recording"
    with mailbus.Context() as context, Recorder(str(directory), context=context):
        free = context.subscription(parking_lot.FREE)
        stop = threading.Event()
        gate = threading.Thread(target=parking_lot.run, args=(context, stop))
        gate.start()
        try:
            eventually(lambda: any(s.service == parking_lot.FEE for s in context.servers))
            for plate in ("AB-1", "CD-2"):
                context.publisher(parking_lot.ENTER).publish(json.dumps({"plate": plate}))
                assert mailbus.wait_for_message(free, 10.0) is not None
            fees = context.client(parking_lot.FEE)
            assert json.loads(fees.call('{"plate": "AB-1"}', 10.0).body)["fee"] == 2.5
            assert "error" in json.loads(fees.call('{"plate": "ZZ-9"}', 10.0).body)
            context.publisher(parking_lot.EXIT).publish('{"plate": "AB-1"}')
            assert mailbus.wait_for_message(free, 10.0) is not None
        finally:
            stop.set()
            gate.join(10.0)
    return directory


def with_gate(pytester: pytest.Pytester, recording: Path | None = None) -> None:
    shutil.copy(GATE, pytester.path / "parking_lot.py")
    if recording is not None:
        shutil.copytree(recording, pytester.path / "recording")


# -- 8. golden tests of a service the system serves ------------------------------------------
GOLDEN_FEE = f"""
def test_fees_as_recorded(system, golden):
    {STARTED}
    outputs = golden.check("recording", outputs=["lot/fee"], rate=1.0)
    assert [(o.what, o.body["plate"]) for o in outputs] == [
        ("response", "AB-1"), ("response", "ZZ-9")
    ]

def test_fees_and_free_places_as_recorded(system, golden):
    {STARTED}
    golden.check("recording", ignore=["stamp"], rate=1.0)
"""


@pytest.mark.slow
def test_a_golden_test_replays_the_requests_to_the_systems_own_service(
    pytester: pytest.Pytester, recording: Path
) -> None:
    with_gate(pytester, recording)
    run(pytester, GOLDEN_FEE).assert_outcomes(passed=2)

    # The fee changed: the responses' fields are told apart as a topic's are.
    gate = pytester.path / "parking_lot.py"
    gate.write_text(gate.read_text().replace("FEE_PER_VISIT = 2.5", "FEE_PER_VISIT = 3.0"))
    changed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "fees_as_recorded")
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        [
            "*outputs differ from the recording recording (order: topic; 2 golden, 2 produced):",
            '*lot/fee #1: lot/fee {"plate": "AB-1", "fee": 3.0}',
            "*fee: expected 2.5, got 3.0",
        ]
    )

    # Accepted with --mailbus-update: the golden file holds the responses.
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-k", "fees_as_recorded", "--mailbus-update"
    ).assert_outcomes(passed=1)
    written = json.loads((pytester.path / "golden" / "test_fees_as_recorded.json").read_text())
    assert [(o["name"], o["what"], o["body"].get("fee")) for o in written["outputs"]] == [
        ("lot/fee", "response", 3.0),
        ("lot/fee", "response", None),
    ]


@pytest.mark.slow
def test_the_golden_test_of_a_service_holds_on_postoffice(
    pytester: pytest.Pytester, recording: Path
) -> None:
    # The gate runs as a process there, answering through the daemon.
    with_gate(pytester, recording)
    run(pytester, GOLDEN_FEE, "--mailbus-transport=postoffice").assert_outcomes(passed=2)


NOTHING_TO_CHECK = f"""
from mailbus.testing.golden_run import GoldenEmpty

def test_an_output_never_produced(system, golden):
    {STARTED}
    golden.check("recording", outputs=["lot/full"], rate=1.0)

def test_none_is_right(system, golden):
    {STARTED}
    assert golden.check("recording", outputs=["lot/full"], rate=1.0, allow_empty=True) == []
"""


@pytest.mark.slow
def test_a_golden_file_of_no_outputs_is_refused_unless_asked(
    pytester: pytest.Pytester, recording: Path
) -> None:
    with_gate(pytester, recording)
    checked = run(pytester, NOTHING_TO_CHECK)
    checked.assert_outcomes(failed=1, passed=1)
    checked.stdout.fnmatch_lines(
        [
            "*GoldenEmpty: golden.check: the recording recording has no output on lot/full: the "
            "test would pass while checking nothing.*allow_empty=True*"
        ]
    )
    updated = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--mailbus-update")
    updated.assert_outcomes(failed=1, passed=1)
    updated.stdout.fnmatch_lines(
        [
            "*GoldenEmpty: golden.check: this run produced no output on lot/full, so * is not "
            "written*"
        ]
    )
    golden = pytester.path / "golden"
    assert not (golden / "test_an_output_never_produced.json").exists()
    # Asked for: the empty file is written, and holds.
    assert json.loads((golden / "test_none_is_right.json").read_text())["outputs"] == []


# -- 9. a where= callable that raises ---------------------------------------------------------
RAISING_WHERE = f"""
def cars(message):
    return message.doc["cars"] == 1  # the gate says "free", not "cars"

def test_free_places(bus, expect, system):
    {STARTED}
    broken = expect.topic("lot/free", where=cars, within=5.0)
    expect.topic("lot/free", where={{"free": 2}}, within=5.0)
    expect.topic("lot/free", where="free<3", within=5.0)
    bus.publisher("lot/enter").publish('{{"plate": "AB-1"}}')

def paid(message):
    return message.doc["amount"] > 0  # the gate says "fee", not "amount"

def test_fee(bus, expect, system):
    {STARTED}
    fees = expect.service("lot/fee").responds(where=paid)
    bus.client("lot/fee").call('{{"plate": "ZZ-9"}}', timeout=10)
    fees.wait()
"""


@pytest.mark.slow
def test_a_where_that_raises_fails_its_own_expectation_and_no_other(
    pytester: pytest.Pytester,
) -> None:
    with_gate(pytester)
    result = run(pytester, RAISING_WHERE)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*expected 1 message on 'lot/free' where cars(message) within 5.0 s: "
            "where=cars(message) raised KeyError: 'cars' (at test_a_where_that_raises_*.py:*) "
            'on message {"free": 2, "stamp": *}; 0 matched of 1 received',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*expected service 'lot/fee' to answer 1 request(s) within 5.0 s, every response "
            "where paid(message): where=paid(message) raised KeyError: 'amount' (at *) on "
            'response {"plate": "ZZ-9", "error": "not parked"}; 1 of 1 responses did not match',
        ]
    )
    # The other expectations on the topic saw the message and held.
    assert "free == 2" not in result.stdout.str()
    assert "free<3" not in result.stdout.str()


# -- 10. env in-process, count and order, JUnit latencies, async tests ------------------------
ENVIRONMENT = """
import os

def test_a_small_lot(bus, expect, system):
    full = expect.topic("lot/free", where={"free": 0}, within=5.0)
    system.start("parking_lot.py", ready=["server:lot/fee"], env={"LOT_CAPACITY": "1"})
    assert os.environ["LOT_CAPACITY"] == "1"
    bus.publisher("lot/enter").publish('{"plate": "AB-1"}')
    full.wait()

def test_two_capacities_in_one_process_are_refused(system):
    system.start("parking_lot.py", ready=["server:lot/fee"], env={"LOT_CAPACITY": "1"})
    with pytest.raises(ValueError, match="LOT_CAPACITY='2'.*runs with LOT_CAPACITY='1'"):
        system.start("parking_lot.py", name="other", env={"LOT_CAPACITY": "2"})

def test_the_environment_is_restored_after_each_test():
    assert "LOT_CAPACITY" not in os.environ
"""


@pytest.mark.slow
def test_env_reaches_a_participant_on_the_in_process_bus(pytester: pytest.Pytester) -> None:
    with_gate(pytester)
    run(pytester, ENVIRONMENT, "-p", "no:randomly").assert_outcomes(passed=3)


COUNT_AND_ORDER = """
def test_cars(bus, expect, faults):
    expect.topic("lot/enter", count=5, within=2.0, ordered=True)
    faults(seed=3, reorder=1.0)
    cars = bus.publisher("lot/enter")
    for n in range(4):
        cars.publish(json.dumps({"plate": f"AB-{n}"}))
"""


@pytest.mark.slow
def test_a_count_failure_does_not_hide_an_order_failure(pytester: pytest.Pytester) -> None:
    result = run(pytester, COUNT_AND_ORDER)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*expected 5 messages on 'lot/enter' within 2.0 s, in order: 4 matched of 4 "
            "received; out of order: message 1 of publisher * came after 2",
        ]
    )


LATENCIES = f"""
def test_fee_of_a_parked_car(bus, expect, system):
    {STARTED}
    fee = expect.service("lot/fee").responds(where={{"fee": 2.5}})
    cars = expect.topic("lot/free")
    bus.publisher("lot/enter").publish('{{"plate": "AB-1"}}')
    cars.wait()
    bus.client("lot/fee").call('{{"plate": "AB-1"}}', timeout=10)

def test_fee_of_a_car_never_parked(bus, expect, system):
    {STARTED}
    expect.service("lot/fee").responds(where={{"fee": 2.5}})
    bus.client("lot/fee").call('{{"plate": "ZZ-9"}}', timeout=10)

def test_cars_out_of_order(bus, expect, faults):
    expect.topic("lot/enter", count=4, within=2.0, ordered=True)
    faults(seed=3, reorder=1.0)
    cars = bus.publisher("lot/enter")
    for n in range(4):
        cars.publish(json.dumps({{"plate": f"AB-{{n}}"}}))
"""


@pytest.mark.slow
def test_only_met_expectations_write_a_latency_into_the_junit_xml(
    pytester: pytest.Pytester,
) -> None:
    with_gate(pytester)
    result = run(pytester, LATENCIES, "--junit-xml=report.xml")
    result.assert_outcomes(passed=1, failed=2)
    cases = ET.parse(pytester.path / "report.xml").getroot().iter("testcase")
    properties = {
        case.get("name"): {p.get("name") for p in case.iter("property")} for case in cases
    }
    assert properties == {
        "test_fee_of_a_parked_car": {"mailbus service lot/fee", "mailbus topic lot/free"},
        "test_fee_of_a_car_never_parked": set(),
        "test_cars_out_of_order": set(),
    }


ASYNC = f"""
import asyncio

async def test_free_places_awaited(bus, expect, system):
    {STARTED}
    free = expect.topic("lot/free", where={{"free": 2}})
    bus.publisher("lot/enter").publish('{{"plate": "AB-1"}}')
    await asyncio.sleep(0)  # the loop runs: this is an asyncio test
    assert (await free).matches[0].doc["free"] == 2

async def test_free_places_missed(bus, expect, system):
    {STARTED}
    free = expect.topic("lot/free", where={{"free": 3}}, within=0.5)
    bus.publisher("lot/enter").publish('{{"plate": "AB-1"}}')
    await free
"""


@pytest.mark.slow
def test_async_tests_need_no_mark(pytester: pytest.Pytester) -> None:
    with_gate(pytester)
    result = run(pytester, ASYNC)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*free: expected 3, got 2"])


@pytest.mark.slow
def test_no_run_warns_about_the_asyncio_loop_scope(pytester: pytest.Pytester) -> None:
    # A project of the kit's users that has not set pytest-asyncio's options.
    result = run(pytester, "def test_bus(bus):\n    assert bus.context.is_initialized\n")
    result.assert_outcomes(passed=1)
    printed = result.stdout.str() + result.stderr.str()
    assert "PytestDeprecationWarning" not in printed
    assert '"asyncio_default_fixture_loop_scope" is unset' not in printed

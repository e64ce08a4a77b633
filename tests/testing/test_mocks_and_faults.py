"""Strict mocks (from a recorded session or a mapping) and seeded faults."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mailbus
import pytest
from inner import run
from mailbus.email_message import Email
from mailbus.sessions.recorder import Recorder
from mailbus.testing.faults import FaultPlan, FaultSender
from mailbus.transport import EmailSender


@pytest.mark.slow
def test_a_strict_mock_fails_on_an_unexpected_call_and_on_calls_never_made(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
def test_unexpected(bus, mock_service):
    mock_service("prices", responses={"apple": "1.20", "pear": "0.80"})
    client = bus.client("prices")
    assert client.call("apple", timeout=5).body == "1.20"
    with pytest.raises(mailbus.ServiceTimeoutError):
        client.call("plum", timeout=0.5)

def test_relaxed(bus, mock_service):
    mock_service("prices", responses={"apple": "1.20", "pear": "0.80"}, strict=False)
    assert bus.client("prices").call("apple", timeout=5).body == "1.20"
""",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*mock_service('prices') could not answer 1 call(s):",
            "*request 'plum'",
            "*recorded requests it knows:",
            "*'apple'",
            "*mock_service('prices'): 1 recorded call(s) never made (strict=False allows it):",
            "*request 'pear' -> '0.80'",
        ]
    )


def record_a_session(directory: Path) -> Path:
    """A session in which a client asked `thermo/convert` twice and was answered."""
    path = directory / "calls"
    with mailbus.Context() as ctx, Recorder(str(path), context=ctx):
        server = ctx.server("thermo/convert")
        client = ctx.client("thermo/convert")
        for celsius in (0, 100):
            client.send_request(json.dumps({"celsius": celsius}))
            request = mailbus.wait_for_request(server, 5)
            assert request is not None
            c = json.loads(request.body)["celsius"]
            server.send_response(request, json.dumps({"fahrenheit": c * 9 / 5 + 32}))
            assert mailbus.wait_for_response(client, 5) is not None
    return path


@pytest.mark.slow
def test_a_mock_from_a_recording_answers_by_body_and_checks_every_call_was_made(
    pytester: pytest.Pytester,
) -> None:
    session = record_a_session(pytester.path)
    result = run(
        pytester,
        f"""
def test_by_body(bus, mock_service):
    mock_service("thermo/convert", from_session={str(session)!r})
    client = bus.client("thermo/convert")
    # JSON bodies match field by field: spacing and 100 vs 100.0 do not matter.
    assert json.loads(client.call('{{"celsius":100.0}}', timeout=5).body) == {{"fahrenheit": 212.0}}
    assert json.loads(client.call('{{"celsius": 0}}', timeout=5).body) == {{"fahrenheit": 32.0}}

def test_one_call_missing(bus, mock_service):
    mock_service("thermo/convert", from_session={str(session)!r})
    bus.client("thermo/convert").call('{{"celsius": 0}}', timeout=5)

def test_in_order(bus, mock_service):
    mock_service("thermo/convert", from_session={str(session)!r}, match="order")
    client = bus.client("thermo/convert")
    assert client.call("anything", timeout=5).body == '{{"fahrenheit": 32.0}}'
    assert client.call("else", timeout=5).body == '{{"fahrenheit": 212.0}}'

def test_no_such_service(mock_service):
    with pytest.raises(ValueError, match="holds no answered request of service 'nope'"):
        mock_service("nope", from_session={str(session)!r})
""",
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_one_call_missing*",
            "*mock_service('thermo/convert'): 1 recorded call(s) never made*",
            "*request '{\"celsius\": 100}' -> '{\"fahrenheit\": 212.0}'",
        ]
    )


class Collect(EmailSender):
    def __init__(self) -> None:
        self.sent: list[str] = []

    def deliver(self, email: Email) -> None:
        self.sent.append(email.body)


def sent_with(plan: FaultPlan | None, count: int = 200) -> list[str]:
    inner = Collect()
    faulty = FaultSender(inner)
    faulty.inject(plan)
    for i in range(count):
        faulty.send(Email(subject="t", body=str(i)))
    faulty.inject(None)  # sends what was held back
    return inner.sent


def test_faults_are_a_function_of_the_seed() -> None:
    plan = FaultPlan(7, drop=0.2, duplicate=0.2, reorder=0.2)
    first, again = sent_with(plan), sent_with(plan)
    assert first == again
    assert first != sent_with(FaultPlan(8, drop=0.2, duplicate=0.2, reorder=0.2))
    assert sent_with(None) == [str(i) for i in range(200)]
    assert len(set(first)) < 200  # some dropped
    assert len(first) != len(set(first))  # some twice
    numbers = [int(b) for b in dict.fromkeys(first)]
    assert numbers != sorted(numbers)  # some out of order


def test_bad_fault_probabilities_are_refused() -> None:
    with pytest.raises(ValueError, match=r"drop is a probability from 0 to 1, got 1\.5"):
        FaultPlan(1, drop=1.5)
    with pytest.raises(ValueError, match="a delay is 0 to 60 seconds"):
        FaultPlan(1, delay=(0.5, 99.0))


FAULTY = """
def test_lossy(bus, expect, faults):
    expect.topic("t", count=40, within=1.0)
    faults(drop=0.3)
    pub = bus.publisher("t")
    for i in range(40):
        pub.publish(str(i))
"""


@pytest.mark.slow
def test_a_faults_test_fails_again_the_same_way_with_its_printed_seed(
    pytester: pytest.Pytester,
) -> None:
    first = run(pytester, FAULTY)
    first.assert_outcomes(failed=1)
    text = first.stdout.str()
    seed = re.search(r"rerun with --mailbus-seed=(\d+)", text)
    assert seed is not None, text
    matched = re.search(r"(\d+) matched of (\d+) received", text)
    assert matched is not None
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--mailbus-seed={seed[1]}")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines([f"*: {matched[0]}", f"*faults(seed={seed[1]}, drop=0.3)*"])


@pytest.mark.slow
def test_faults_act_on_the_postoffice_bus_too(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
@pytest.mark.mailbus_transports("inprocess", "postoffice")
def test_all_dropped(bus, expect, faults):
    expect.never("t", during=0.5)
    arrived = expect.topic("u", within=10)
    faults(seed=1, drop=1.0)
    bus.publisher("t").publish("lost")
    faults(seed=1)  # no faults any more
    bus.publisher("u").publish("kept")
    arrived.wait()
""",
    )
    result.assert_outcomes(passed=2)


@pytest.mark.mailstack
def test_an_outage_of_the_mail_server_delays_mail_and_loses_none(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
@pytest.mark.mailbus_transports("mail")
def test_outage(bus, expect, outage):
    seen = expect.topic("t", count=2, within=60)
    with outage():
        bus.publisher("t").publish("during")
        assert not seen.matches  # the server is down: nothing can arrive yet
    bus.publisher("t").publish("after")
    assert sorted(m.body for m in seen.wait().matches) == ["after", "during"]

def test_not_in_process(outage):
    with pytest.raises(Exception, match="an outage is simulated on the mail transport"):
        with outage():
            pass
""",
    )
    result.assert_outcomes(passed=2)

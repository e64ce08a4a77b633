"""Tests of the thermo example with the Mailbus testing kit (docs/testing-your-system.md).

Run them with `mailbus test examples` (in-process), or on a real PostOffice daemon or
mail server with `mailbus test examples --transport postoffice` (or `mail`): the same
files start as processes there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def converter(system):  # type: ignore[no-untyped-def]
    return system.start("converter.py", cwd=HERE, ready=["server:thermo/convert"])


def test_the_sensor_publishes_readings_at_ten_hertz(system, expect):  # type: ignore[no-untyped-def]
    rate = expect.rate("sensors/temp", hz=10, tolerance=0.5, during=1.5)
    first = expect.topic("sensors/temp", where={"sensor": "s1", "seq": 0}, within=10)
    system.start("sensor.py", cwd=HERE, ready=["publisher:sensors/temp"])
    assert first.wait().matches[0].doc["celsius"] == 20.0
    rate.wait()


def test_the_converter_answers_in_fahrenheit(bus, expect, converter):  # type: ignore[no-untyped-def]
    calls = expect.service("thermo/convert").responds(where={"fahrenheit": 212.0}).latency(p95=5.0)
    response = bus.client("thermo/convert").call(json.dumps({"celsius": 100}), timeout=10)
    assert json.loads(response.body) == {"celsius": 100.0, "fahrenheit": 212.0}
    calls.wait()


def test_a_hot_reading_raises_one_alert_and_a_cool_one_none(bus, expect, converter):  # type: ignore[no-untyped-def]
    hot = expect.topic("alerts/hot", where={"celsius": 31.0, "level": "hot"}, within=10)
    expect.never("alerts/hot", where={"celsius": 20.0}, during=1.0)
    readings = bus.publisher("sensors/temp")
    readings.publish(json.dumps({"sensor": "s9", "celsius": 20.0}))
    readings.publish(json.dumps({"sensor": "s9", "celsius": 31.0}))
    assert hot.wait().matches[0].doc["sensor"] == "s9"


def test_the_converter_alerts_as_recorded(system, golden):  # type: ignore[no-untyped-def]
    # The readings of the recording are replayed into the converter; its alerts (the
    # topics it publishes) are compared with the recorded ones, or with
    # golden/<this test>.json once `--mailbus-update` has written it.
    system.start("converter.py", cwd=HERE, ready=["server:thermo/convert"])
    # rate=1: as recorded, 100 ms apart. Outputs are compared in the order the converter
    # produced them, but a mail server may hand the converter two readings sent closer
    # together than it delivers them the other way round (seen at 50 ms on a loaded
    # machine), and then the converter's own output changes order.
    outputs = golden.check(HERE / "recording", order="topic", rate=1.0)
    assert {o.name for o in outputs} == {"alerts/hot"}

"""Golden tests from a recording: the example system's changed output is caught on every
transport and accepted with --mailbus-update (in-process: what the update writes does not
depend on the transport); normalisers, tolerance and order."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mailbus.testing.golden import (
    Normaliser,
    Output,
    compare,
    in_produced_order,
    read_golden,
    write_golden,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thermo"

TRANSPORTS = [
    "inprocess",
    "postoffice",
    pytest.param("mail", marks=pytest.mark.mailstack),
]


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_changed_output_fails_until_it_is_accepted_with_update(
    pytester: pytest.Pytester, transport: str
) -> None:
    for name in ("converter.py", "sensor.py", "test_thermo.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    shutil.copytree(EXAMPLE / "recording", pytester.path / "recording")
    args = ["-p", "no:cacheprovider", f"--mailbus-transport={transport}", "-k", "recorded"]

    as_recorded = pytester.runpytest_subprocess(*args)
    as_recorded.assert_outcomes(passed=1)

    converter = pytester.path / "converter.py"
    converter.write_text(converter.read_text().replace('"level": "hot"', '"level": "HOT"'))
    changed = pytester.runpytest_subprocess(*args)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        [
            "*outputs differ from the recording * (order: topic; 4 golden, 4 produced):",
            '*alerts/hot #1: alerts/hot {"sensor": "s1", "celsius": 29.0, "level": "HOT"}',
            '*level: expected "hot", got "HOT"',
            "*run with --mailbus-update to accept this run's outputs",
        ]
    )

    if transport != "inprocess":
        return  # accepting a run rewrites a file: the same on every transport
    pytester.runpytest_subprocess(*args, "--mailbus-update").assert_outcomes(passed=1)
    written = pytester.path / "golden" / "test_the_converter_alerts_as_recorded.json"
    assert [o.body["level"] for o in read_golden(written)] == ["HOT"] * 4
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)


def out(name: str, **body: object) -> Output:
    return Output(name, "message", body)


def test_a_missing_and_an_extra_output_are_named_each() -> None:
    golden = [out("a", n=1), out("a", n=2), out("a", n=3)]
    assert compare(golden, [out("a", n=1), out("a", n=3), out("a", n=4)], "topic", 0) == [
        'a: golden output #2 not produced: a {"n": 2}',
        'a #3: output not in the golden file: a {"n": 4}',
    ]


def test_order_per_topic_global_or_none() -> None:
    golden = [out("a", n=1), out("b", n=1)]
    swapped = [out("b", n=1), out("a", n=1)]
    assert compare(golden, swapped, "topic", 0) == []
    assert compare(golden, swapped, "global", 0) != []
    assert compare(golden, list(reversed(golden)), "none", 0) == []
    assert compare(golden, [out("a", n=1)], "none", 0) == ['golden output not produced: b {"n": 1}']


def test_floats_compare_within_the_tolerance_and_fields_are_named() -> None:
    golden = [out("a", x=1.0, pose={"y": 2.0})]
    assert compare(golden, [out("a", x=1.0004, pose={"y": 2.0})], "topic", 1e-3) == []
    assert compare(golden, [out("a", x=1.1, pose={"z": 2.0})], "topic", 1e-3) == [
        'a #1: a {"x": 1.1, "pose": {"z": 2.0}}',
        "    pose.y: expected 2.0, missing",
        "    pose.z: not in the golden output, got 2.0",
        "    x: expected 1.0, got 1.1",
    ]


def test_normalisers_drop_and_rewrite_fields_that_change_between_runs() -> None:
    norm = Normaliser(ignore=["stamp", "meta.host"], normalise={"id": lambda v: "<id>"})
    body = json.dumps({"stamp": 17, "id": "f3a9", "meta": {"host": "x", "v": 1}, "n": 2})
    assert norm("a", "message", body).body == {"id": "<id>", "meta": {"v": 1}, "n": 2}
    assert norm("a", "message", "not json").body == "not json"


def test_an_unreadable_golden_file_says_how_to_write_it_anew(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text("{nope")
    with pytest.raises(ValueError, match="--mailbus-update writes it anew"):
        read_golden(path)
    write_golden(path, [out("a", n=1)], "s")
    assert read_golden(path) == [out("a", n=1)]


def test_outputs_are_compared_in_the_order_the_system_produced_them() -> None:
    # A mail server delivered the third alert before the second: by their publishers'
    # timestamps they are still in the order produced, so the golden run stays green.
    arrivals = ["first", "third", "second", "fourth"]
    produced_ns = [100, 300, 200, 400]
    assert in_produced_order(arrivals, produced_ns) == ["first", "second", "third", "fourth"]
    # Same timestamp: arrival order decides.
    assert in_produced_order(["a", "b", "c"], [5, 5, 1]) == ["c", "a", "b"]

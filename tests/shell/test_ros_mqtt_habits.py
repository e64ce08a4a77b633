"""What a ROS or MQTT user types first: `pub --rate` until Ctrl-C, MQTT's `+` and a
`*` that stays within a level, hz over several topics, echo's timestamp, body-only and
--truncate-length, `/regex/` in --where, a request body from stdin or a file."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import mailbus
import pytest
from query_cases import BODIES
from waiting import eventually

from shell.shell_system import MAILBUS, WAIT_S, System, json_lines


def demo(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MAILBUS, *args, "--demo"], input=stdin, capture_output=True, text=True, timeout=WAIT_S
    )


def test_pub_at_a_rate_until_ctrl_c() -> None:
    process = subprocess.Popen(
        [*MAILBUS, "topic", "pub", "lab/r", '{"go": 1}', "--rate", "50", "--demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = [process.stdout.readline() for _ in range(3)]
    assert all(line.startswith("published lab/r <") for line in lines), lines
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, err
    said = re.fullmatch(r"topic pub: published (\d+)", err.strip())
    assert said is not None, err
    assert int(said[1]) >= 3
    assert all(line.startswith("published lab/r <") for line in out.splitlines())


def test_mqtt_plus_and_a_star_within_one_level(shared_system: System) -> None:
    plus = shared_system.start("lab.plus", "topic", "echo", "lab/+/x", "--count", "2", "--json")
    star = shared_system.start("lab.star", "topic", "echo", "lab/*", "--count", "1", "--json")
    for box in ("lab.plus", "lab.star"):
        eventually(lambda box=box: shared_system.own_boxes(box), WAIT_S, "the echo's box")
    with mailbus.Context(shared_system.options("lab.pub")) as ctx:
        for topic in ("lab/a/b/x", "lab/a/x", "lab/ax", "lab/b/x"):
            ctx.publisher(topic).publish("{}")
    out, err = plus.communicate(timeout=WAIT_S)
    assert plus.returncode == 0, err
    assert [line["topic"] for line in json_lines(out)] == ["lab/a/x", "lab/b/x"]
    out, err = star.communicate(timeout=WAIT_S)
    assert star.returncode == 0, err
    assert [line["topic"] for line in json_lines(out)] == ["lab/ax"]


@pytest.mark.slow
def test_hz_over_several_topics_and_a_glob() -> None:
    done = demo("topic", "hz", "robot/pose", "sensors/+", "--json", "--seconds", "3")
    assert done.returncode == 0, done.stderr
    rates = {line["topic"]: float(line["rate_hz"]) for line in json_lines(done.stdout)}  # type: ignore[arg-type]
    assert set(rates) == {"robot/pose", "sensors/temperature"}, rates
    human = demo("topic", "hz", "robot/pose", "sensors/*", "--seconds", "3")
    assert "robot/pose: average rate:" in human.stdout
    assert "sensors/temperature: average rate:" in human.stdout


def test_echo_with_a_timestamp_body_only_and_cut() -> None:
    done = demo("topic", "echo", "robot/pose", "--once", "--timestamp", "--body-only", "-l", "8")
    assert done.returncode == 0, done.stderr
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00"
    assert re.fullmatch(stamp + r' \{"x": \d\.\.\.\.\n', done.stdout), done.stdout


def test_where_takes_a_regex_as_find_does(shared_system: System) -> None:
    echo = shared_system.start(
        "lab.regex", "topic", "echo", "lab/t", "--where", r'/"unit":\s"[F]"/ /HOT/i', "--json"
        , "--count", "1"
    )  # fmt: skip
    eventually(lambda: shared_system.own_boxes("lab.regex"), WAIT_S, "the echo's box")
    with mailbus.Context(shared_system.options("lab.pub")) as ctx:
        for body in BODIES:
            ctx.publisher("lab/t").publish(body)
    out, err = echo.communicate(timeout=WAIT_S)
    assert echo.returncode == 0, err
    assert [line["body"] for line in json_lines(out)] == [BODIES[2]]


@pytest.mark.slow
def test_service_call_body_from_stdin_or_a_file(tmp_path: Path) -> None:
    piped = demo("service", "call", "demo/add", "--file", "-", stdin="[1, 2, 3]")
    assert piped.returncode == 0 and json.loads(piped.stdout) == {"sum": 6}, piped.stderr
    request = tmp_path / "request.json"
    request.write_text("[10, 20]\n")
    filed = demo("service", "call", "demo/add", "--file", str(request))
    assert filed.returncode == 0 and json.loads(filed.stdout) == {"sum": 30}, filed.stderr

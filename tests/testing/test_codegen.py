"""Tests saved from a message, a call and a recording are readable Python that runs
green as saved (in a subprocess, through `mailbus test`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from mailbus import demo
from mailbus.errors import InvalidNameError
from mailbus.testing.codegen import (
    call_test,
    function_name,
    message_test,
    session_test,
    steady_fields,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thermo"
CONVERTER = (str(EXAMPLE / "converter.py"), ["server:thermo/convert"])
SENSOR = (str(EXAMPLE / "sensor.py"), ["publisher:sensors/temp"])


def run_saved(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    ast.parse(source)  # it is Python a user can open and edit
    path = tmp_path / "test_saved.py"
    path.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mailbus", "test", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_a_saved_call_runs_green(tmp_path: Path) -> None:
    source = call_test(
        "thermo/convert",
        '{"celsius": 100}',
        '{"celsius": 100.0, "fahrenheit": 212.0}',
        start=[CONVERTER],
    )
    assert (
        "expect.service('thermo/convert').responds(where={'celsius': 100.0, 'fahrenheit': 212.0})"
        in source
    )
    done = run_saved(tmp_path, source)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


@pytest.mark.slow
def test_a_saved_message_runs_green(tmp_path: Path) -> None:
    source = message_test(
        "sensors/temp", '{"sensor": "s1", "seq": 0, "celsius": 20.0}', start=[SENSOR]
    )
    assert "def test_sensors_temp(bus, expect, system):" in source
    done = run_saved(tmp_path, source)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_saved_recording_runs_green(tmp_path: Path) -> None:
    source = session_test(str(EXAMPLE / "recording"), outputs=["alerts/hot"], start=[CONVERTER])
    done = run_saved(tmp_path, source)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_saved_call_fails_when_the_service_answers_otherwise(tmp_path: Path) -> None:
    source = call_test(
        "thermo/convert", '{"celsius": 100}', '{"fahrenheit": 200.0}', start=[CONVERTER]
    )
    done = run_saved(tmp_path, source)
    assert done.returncode == 1
    assert "fahrenheit: expected 200.0, got 212.0" in done.stdout


def test_names_become_identifiers_and_bad_names_are_refused() -> None:
    assert function_name("thermo/convert") == "test_thermo_convert"
    assert function_name("") == "test_saved"
    with pytest.raises(InvalidNameError):
        message_test("bad\nname", "{}")


def test_steady_fields_keep_what_did_not_change_between_messages() -> None:
    seen = [
        '{"sensor": "t1", "celsius": 21.2, "t": 0.1, "unit": "C"}',
        '{"sensor": "t1", "celsius": 21.4, "t": 0.2, "unit": "C"}',
        "not json",
        '{"sensor": "t1", "celsius": 21.3, "t": 0.3, "unit": "C"}',
    ]
    assert steady_fields(seen[:2] + seen[3:]) == {"sensor": "t1", "unit": "C"}
    # A body without the field (or not JSON) leaves nothing steady about it.
    assert steady_fields(seen) == {}
    assert steady_fields(seen[-1:]) == {"sensor": "t1", "celsius": 21.3, "t": 0.3, "unit": "C"}
    assert steady_fields([]) == {}
    source = message_test("sensors/temperature", seen[-1], where={"sensor": "t1"})
    assert "expect.topic('sensors/temperature', where={'sensor': 't1'}, within=10.0)" in source
    assert "expect.topic('robot/pose', within=10.0)" in message_test(
        "robot/pose", '{"x": 1}', where={}
    )


DEMO_READY = ["publisher:sensors/temperature", "server:demo/add"]


@pytest.mark.slow
@pytest.mark.parametrize("command", [str(Path(demo.__file__)), "python -m mailbus.demo"])
@pytest.mark.parametrize("transport", ["inprocess", "postoffice"])
def test_the_demo_is_a_participant_a_saved_test_starts(
    tmp_path: Path, transport: str, command: str
) -> None:
    """On the in-process bus the demo's run() joins the test's context; on PostOffice the
    demo runs as a process with the options the kit gives it. As a file or as a module
    (`python -m`, what the workbench saves: it holds wherever mailbus is installed)."""
    DEMO = (command, DEMO_READY)
    source = call_test("demo/add", "[1, 2, 3]", '{"sum": 6}', start=[DEMO])
    source += "\n\n" + message_test("sensors/temperature", '{"sensor": "t1"}', start=[DEMO]).split(
        '"""', 2
    )[2].replace("def test_sensors_temperature", "def test_temperature")
    path = tmp_path / "test_demo.py"
    path.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "mailbus", "test", str(path), "--transport", transport, "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout

"""`mailbus test`: the example system's tests pass through it, and its JUnit XML carries
each expectation's observed latency as a property."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def mailbus_test(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailbus", "test", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


def cases(report: Path) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in ET.parse(report).getroot().iter("testcase")}


@pytest.mark.slow
def test_the_examples_pass_and_report_latencies_in_junit_xml(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    done = mailbus_test("examples", "--junit-xml", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    found = cases(report)
    assert len(found) == 4
    assert not [c for c in found.values() if c.find("failure") is not None]
    properties = {
        p.attrib["name"]: float(p.attrib["value"])
        for p in found["test_the_converter_answers_in_fahrenheit"].iter("property")
    }
    assert set(properties) == {"mailbus service thermo/convert"}
    assert 0 < properties["mailbus service thermo/convert"] < 10


@pytest.mark.slow
def test_a_failing_expectation_is_a_junit_failure_and_exit_status_1(tmp_path: Path) -> None:
    (tmp_path / "test_quiet.py").write_text(
        "def test_quiet(expect):\n    expect.topic('nobody/here', within=0.2)\n"
    )
    report = tmp_path / "junit.xml"
    done = mailbus_test("test_quiet.py", "--junit-xml", str(report), cwd=tmp_path)
    assert done.returncode == 1
    failure = cases(report)["test_quiet"].find("failure")
    assert failure is not None
    assert "expected 1 message on 'nobody/here' within 0.2 s: 0 matched of 0 received" in (
        failure.attrib["message"] + (failure.text or "")
    )


def test_a_missing_path_is_refused_clearly(tmp_path: Path) -> None:
    done = mailbus_test("no-such-tests", cwd=tmp_path)
    assert done.returncode == 2
    assert "mailbus test: no such file or folder: no-such-tests" in done.stderr


@pytest.mark.slow
def test_one_test_of_a_file_is_run_by_its_node_id(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    done = mailbus_test("test_two.py::test_b", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    missing = mailbus_test("test_none.py::test_b", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no such file or folder: test_none.py::test_b" in missing.stderr


@pytest.mark.slow
def test_the_kits_options_after_the_path_are_taken_and_the_rest_goes_to_pytest(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_where.py").write_text(
        "def test_where(bus):\n    assert bus.transport == 'postoffice'\n"
    )
    done = mailbus_test("test_where.py", "--transport", "postoffice", "-rA", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED test_where.py::test_where" in done.stdout  # -rA reached pytest
    # After --, pytest's own options (argparse lists them among the paths).
    dashed = mailbus_test("test_where.py", "--", "-rA", "--transport=x", cwd=tmp_path)
    assert dashed.returncode == 4  # pytest refused --transport=x: it was passed on as given
    assert "unrecognized arguments: --transport=x" in dashed.stderr

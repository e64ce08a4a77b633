"""The Tests view's model: a JUnit XML report read into tests and checks, the command
line for the attached system, pytest's exit statuses said for a person, and saved tests
that never replace a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench.model.junit import Check, JunitError, Outcome, parse_junit
from mailbus_workbench.model.saved_tests import SaveError, demo_start, suggest_path, write_new
from mailbus_workbench.model.tests_run import (
    exit_meaning,
    folder_problem,
    run_command,
    target_for,
)

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="2" skipped="1" tests="5" time="0.421">
<testcase classname="test_x" name="test_ok" file="test_x.py" line="1" time="0.012">
<properties><property name="mailbus topic a/b" value="0.0031" />
<property name="other" value="x" /></properties></testcase>
<testcase classname="test_x" name="test_bad" file="test_x.py" line="3" time="0.213">
<failure message="Failed: expected 1 message on 'a/b' where n == 1 within 0.2 s: 0 matched&#10;\
timeline: nothing arrived">expected 1 message on 'a/b' where n == 1 within 0.2 s: \
0 matched of 2
nearest misses (closest first):
  +0.010 s  message {"n": 2}
      n: expected 1, got 2

expected service 'c/d' to answer 1 request(s) within 5.0 s: 0 answered</failure></testcase>
<testcase classname="sub.test_y.TestC" name="test_p[1]" file="sub/test_y.py" line="6"
 time="0.001"><error message="fixture 'nope' not found">E fixture 'nope' not found</error>
</testcase>
<testcase classname="test_x" name="test_skip" file="test_x.py" line="9" time="0.001">
<skipped type="pytest.skip" message="no">skipped</skipped></testcase>
</testsuite></testsuites>"""


def test_a_report_becomes_tests_with_their_checks_and_latencies() -> None:
    report = parse_junit(REPORT)
    ok, bad, error, skipped = report.cases
    assert (ok.outcome, ok.duration_s, ok.line) == (Outcome.PASSED, 0.012, 2)
    assert ok.checks == (Check("topic a/b", True, 0.0031),)  # other properties are not checks
    assert bad.outcome is Outcome.FAILED and bad.failed
    assert bad.message == "Failed: expected 1 message on 'a/b' where n == 1 within 0.2 s: 0 matched"
    assert "n: expected 1, got 2" in bad.text  # the near-miss diff is kept whole
    assert [c.what for c in bad.checks] == [
        "expected 1 message on 'a/b' where n == 1 within 0.2 s",
        "expected service 'c/d' to answer 1 request(s) within 5.0 s",
    ]
    assert not any(c.passed for c in bad.checks)
    assert error.outcome is Outcome.ERROR and error.failed
    assert error.node_id == "sub/test_y.py::TestC::test_p[1]"
    assert ok.node_id == "test_x.py::test_ok"
    assert skipped.outcome is Outcome.SKIPPED and not skipped.failed
    assert report.summary() == "1 passed, 1 failed, 1 error, 1 skipped in 0.42 s"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "not XML"),
        ("<html><body/></html>", "not JUnit XML (its root is <html>)"),
        ("<testsuites><testsuite>", "not XML"),
    ],
)
def test_a_report_that_is_not_junit_is_refused_clearly(text: str, said: str) -> None:
    with pytest.raises(JunitError, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_junit(text)


def test_an_empty_report_says_no_tests() -> None:
    assert parse_junit("<testsuites/>").summary() == "no tests"


def test_the_command_runs_the_folder_or_the_named_tests_against_the_attached_system(
    tmp_path: Path,
) -> None:
    report = tmp_path / "r.xml"
    attached = target_for("/etc/my.toml", demo=False)
    argv = run_command(attached, report, python="py")
    assert argv[:7] == ["py", "-m", "mailbus", "test", "--junit-xml", str(report), "--config"]
    assert argv[7:9] == ["/etc/my.toml", "."]
    rerun = run_command(target_for(None, demo=True), report, ["a.py::t"], python="py")
    assert "--config" not in rerun and "a.py::t" in rerun and "." not in rerun[:8]
    assert "system.start" in target_for(None, demo=True).note
    assert "in-process bus" in target_for(None, demo=False).note


def test_exit_statuses_are_said_for_a_person(tmp_path: Path) -> None:
    assert exit_meaning(0) == "all passed"
    assert "could not be collected" in exit_meaning(2)
    assert "no tests were collected" in exit_meaning(5)
    assert "usage error" in exit_meaning(4)
    assert exit_meaning(-15) == "the run was stopped (signal 15)"
    assert "No folder" in folder_problem(tmp_path / "nope")
    (tmp_path / "f").write_text("")
    assert "is not a folder" in folder_problem(tmp_path / "f")
    assert folder_problem(tmp_path) == ""


def test_a_saved_test_never_replaces_a_file(tmp_path: Path) -> None:
    folder = tmp_path / "tests"
    path = suggest_path(folder, "sensors/temperature")
    assert path == folder / "test_sensors_temperature.py"
    write_new(path, "# one\n")  # the folder is made
    assert suggest_path(folder, "sensors/temperature").name == "test_sensors_temperature_2.py"
    with pytest.raises(SaveError, match="exists: not overwritten"):
        write_new(path, "# two\n")
    assert path.read_text() == "# one\n"
    with pytest.raises(SaveError, match=r"test_\*\.py"):
        write_new(folder / "notes.txt", "")


def test_the_demo_is_started_only_for_what_it_offers() -> None:
    ((command, ready),) = demo_start(topic="sensors/temperature")
    assert command == "python -m mailbus.demo"  # wherever mailbus is installed
    assert ready == ["publisher:sensors/temperature"]
    assert demo_start(service="demo/add")[0][1] == ["server:demo/add"]
    assert demo_start(topic="elsewhere/x") == ()

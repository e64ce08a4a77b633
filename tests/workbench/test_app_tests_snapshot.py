"""A snapshot of the Tests view after a run with a failure: tests and checks with their
timings and latencies, the failed test selected and its near-miss diff beside it (a
fixed report, so that the picture holds still)."""

from __future__ import annotations

from pathlib import Path

from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.model.junit import parse_junit
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.tests import RunResult, TestsView
from textual.pilot import Pilot
from wb_helpers import screen_text, until

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="1" skipped="0" tests="3" time="2.481">
<testcase classname="test_sensors_temperature" name="test_sensors_temperature"
 file="test_sensors_temperature.py" line="3" time="0.652"><properties>
<property name="mailbus topic sensors/temperature" value="0.098112" /></properties></testcase>
<testcase classname="test_demo_add" name="test_demo_add" file="test_demo_add.py" line="3"
 time="0.731"><properties><property name="mailbus service demo/add" value="0.004021" />
</properties></testcase>
<testcase classname="test_never" name="test_never_matches" file="test_never.py" line="3"
 time="1.094"><failure message="expected 1 message on 'sensors/temperature' where sensor ==\
 'nope' within 1.0 s: 0 matched of 9 received">expected 1 message on 'sensors/temperature' \
where sensor == 'nope' within 1.0 s: 0 matched of 9 received
nearest misses (closest first):
  +0.912 s  message {"sensor": "t1", "celsius": 21.18, "t": 1.0}
      sensor: expected 'nope', got "t1"
  +0.811 s  message {"sensor": "t1", "celsius": 21.21, "t": 0.9}
      sensor: expected 'nope', got "t1"
timeline (9 arrived, 0 matched):
  +0.112 s  miss   message sensors/temperature  {"sensor": "t1", "celsius": 21.02, "t": 0.1}
  +0.211 s  miss   message sensors/temperature  {"sensor": "t1", "celsius": 21.05, "t": 0.2}
</failure></testcase></testsuite></testsuites>"""


def test_the_tests_view_after_a_run_with_a_failure(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(
        keymap_file=Path("keymap.toml"),
        templates_file=tmp_path / "templates.toml",
        tests_folder=Path("tests"),
    )
    app = WorkbenchApp(settings=settings, live=False)

    async def run_before(pilot: Pilot[object]) -> None:
        await pilot.pause()
        await pilot.press("T")
        view = app.query_one(TestsView)
        view.post_message(TestsView.Finished(RunResult(1, parse_junit(REPORT), "", "", False)))
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=(120, 34))


async def test_at_120_columns_no_row_of_the_tests_is_cut(tmp_path: Path) -> None:
    """The table took half the width: a check's name ran under the report beside it."""
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml",
        templates_file=tmp_path / "templates.toml",
        tests_folder=tmp_path,
    )
    app = WorkbenchApp(settings=settings, live=False)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("T")
        view = app.query_one(TestsView)
        view.post_message(TestsView.Finished(RunResult(1, parse_junit(REPORT), "", "", False)))
        await until(pilot, lambda: view.report is not None, "the report")
        await pilot.pause()
        text = screen_text(app)
        assert "✘ expected 1 message on 'sensors/temperature' …" in text, text
        for name in ("✔ topic sensors/temperature", "✔ service demo/add", "✘ test_never_matches"):
            assert name in text, text

"""The example and live notebooks run; the command line records (Ctrl-C flushes), replays and
analyzes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import polars as pl
import pytest
from mailbus.cli import main
from mailbus.sessions import analysis, recorder
from mailbus.sessions import cli as sessions_cli
from mailbus.sessions.reader import open_session
from nbclient import NotebookClient
from sessions_helpers import SAMPLES

VEGALITE = "application/vnd.vegalite.v5+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def run_notebook(name: str) -> list[nbformat.NotebookNode]:
    notebook = nbformat.read(SAMPLES / name, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(SAMPLES)}},
    )
    client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


@pytest.mark.slow
def test_example_notebook_executes() -> None:
    outputs = run_notebook("example.ipynb")
    charts = [o for o in outputs if VEGALITE in o.get("data", {})]
    assert len(charts) == 5
    assert all(o["data"][VEGALITE]["datasets"] for o in charts)


@pytest.mark.slow
def test_live_notebook_executes_against_the_demo() -> None:
    outputs = run_notebook("live.ipynb")
    widgets = [o for o in outputs if WIDGET in o.get("data", {})]
    assert len(widgets) == 1
    assert len([o for o in outputs if VEGALITE in o.get("data", {})]) == 2
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("demo/add: answered" in h for h in html)


def test_cli_constants_match_the_modules() -> None:
    assert tuple(analysis.TABLES) == sessions_cli.TABLE_NAMES
    assert sessions_cli.ENGINES == analysis.ENGINES
    assert sessions_cli.DEFAULT_BODY_CAP == recorder.DEFAULT_BODY_CAP
    assert sessions_cli.DEFAULT_RAW_CAP == recorder.DEFAULT_RAW_CAP
    assert sessions_cli.DEFAULT_MAX_QUEUED == recorder.DEFAULT_MAX_QUEUED


@pytest.mark.slow
def test_record_until_ctrl_c_then_the_session_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "rec"
    child = subprocess.Popen(
        [sys.executable, "-m", "mailbus", "record", str(path), "--demo"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        first = child.stderr.readline()  # the live count's first line
        assert first.startswith("recording "), first
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == 0, err
    assert "recorded" in err
    session = open_session(path)
    assert session.complete
    assert session.read().height == session.manifest["counts"]["events"]


def test_replay_and_analyze_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "replayed"
    assert main(["replay", str(SAMPLES / "gaps"), "--rate", "50", "--record", str(out)]) == 0
    assert "replayed" in capsys.readouterr().err
    replayed = open_session(out).read()
    original = open_session(SAMPLES / "gaps").read()
    sent = original.filter(pl.col("kind") == "message.published").height
    assert replayed.filter(pl.col("kind") == "replay.sent").height == sent

    assert main(["analyze", str(SAMPLES / "gaps"), "--format", "json"]) == 0
    tables = json.loads(capsys.readouterr().out)
    assert set(tables) == set(analysis.TABLES)
    assert sum(row["missing"] for row in tables["sequences"]) > 0

    target = tmp_path / "tables"
    assert (
        main(["analyze", str(SAMPLES / "demo"), "--format", "parquet", "--output", str(target)])
        == 0
    )
    written = sorted(p.stem for p in target.glob("*.parquet"))
    assert written == sorted(analysis.TABLES)
    topics = pl.read_parquet(target / "topics.parquet")
    assert topics.equals(analysis.topic_stats([SAMPLES / "demo"]))

    assert main(["analyze", str(SAMPLES / "demo"), "--table", "services"]) == 0
    printed = capsys.readouterr().out
    assert "== services" in printed and "demo/add" in printed and "== topics" not in printed


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--stop", "1e999"], "--stop must be a finite number of seconds"),
        (["--start", "1e999"], "--start must be a finite number of seconds"),
        (["--start", "nan"], "--start must be a finite number of seconds"),
        (["--rate", "1e999"], "rate must be a positive finite factor"),
        (["--include", "["], "bad --include filter '['"),
        (["--exclude", "(x"], "bad --exclude filter '(x'"),
        (["--prefix", " replay/"], "replay prefix"),
        (["--prefix", "re\nplay/"], "replay prefix"),
    ],
)
def test_replay_refuses_bad_numbers_and_filters_in_one_line(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["replay", str(SAMPLES / "gaps"), *flags]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mailbus replay: error: "), err
    assert message in err


@pytest.mark.parametrize("size", ["1e999", "nan", "0", "2e6"])
def test_record_refuses_a_part_size_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: str
) -> None:
    # 1e999 crashed with OverflowError once the context was up.
    with pytest.raises(SystemExit) as caught:
        main(["record", str(tmp_path / "s"), "--part-mb", size, "--seconds", "1"])
    assert caught.value.code == 2
    assert "argument --part-mb" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()

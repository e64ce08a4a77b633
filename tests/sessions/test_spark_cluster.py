"""The analysis on a real Spark standalone cluster (a master, two workers) and through a
real Spark Connect server, both started from pyspark's own scripts (spark_cluster.py):
the same tables as polars. Also: the URL checks, and many sessions (globs) at once."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from mailbus.cli import main
from mailbus.sessions import analysis
from mailbus.sessions.reader import SessionError
from mailbus.sessions.spark import SparkUnreachableError, check_master, check_remote
from mailbus.stacks.spark_cluster import HOST, SparkProcesses, free_port
from polars.testing import assert_frame_equal
from sessions_helpers import SAMPLES, tiny_events, write_session
from waiting import eventually

REL_TOL = 1e-12
ANALYZE_TIMEOUT_S = 240.0


# Module scope: the four JVMs (master, two workers, Connect server) serve this file's
# tests only and are stopped after them, not kept idling through the rest of the run.
@pytest.fixture(scope="module")
def spark_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkProcesses]:
    if shutil.which("java") is None:
        pytest.fail("Java is not installed (scripts/install-system-packages installs it)")
    processes = SparkProcesses(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield processes
    finally:
        processes.stop()


@pytest.fixture(scope="session")
def many_sessions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Several sessions in a folder whose name needs quoting in a URI (Spark names files
    by URI), two of them with the same directory name (labels tiny and tiny#1)."""
    root = tmp_path_factory.mktemp("many") / "fleet 100% #1"
    paths = [shutil.copytree(SAMPLES / "gaps", root / "gaps")]
    paths.append(write_session(root / "tiny", tiny_events()))
    paths.append(write_session(root / "again" / "tiny", tiny_events()[:12]))
    return paths


def _assert_same_tables(actual: dict[str, pl.DataFrame], expected: dict[str, pl.DataFrame]) -> None:
    assert set(actual) == set(expected)
    for name, frame in expected.items():
        assert frame.height > 0, f"{name} is empty: the sessions should exercise it"
        assert_frame_equal(actual[name], frame, check_exact=False, rel_tol=REL_TOL, abs_tol=0)


def _from_json(text: str, expected: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    tables = json.loads(text)
    return {
        name: pl.DataFrame(rows, schema=expected[name].schema, orient="row")
        for name, rows in tables.items()
    }


def _cli(
    *args: str, prelude: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`mailbus ARGS` in a fresh Python process (a driver JVM of its own, if any)."""
    code = prelude + "import sys\nfrom mailbus.cli import main\nrc = main(sys.argv[1:])\n"
    code += "from pyspark import SparkContext\n"
    code += "print('jvm in caller:', SparkContext._jvm is not None, file=sys.stderr)\n"
    code += "sys.exit(rc)\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=ANALYZE_TIMEOUT_S,
        env=env,
    )


@pytest.mark.spark
@pytest.mark.slow
def test_analyze_on_a_standalone_cluster(
    spark_processes: SparkProcesses, many_sessions: list[Path]
) -> None:
    """`mailbus analyze --engine spark --master spark://...`: its executors on the two
    workers compute every table of several sessions, equal to polars'."""
    paths = [str(p) for p in many_sessions]
    expected = analysis.analyze(paths)
    run = _cli(
        "analyze", *paths, "--engine", "spark", "--master", spark_processes.master_url,
        "--format", "json", env=spark_processes.env(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    _assert_same_tables(_from_json(run.stdout, expected), expected)
    # It ran on the cluster: the master lists the finished application.
    state = spark_processes.master_state()
    apps = [app["name"] for app in state["completedapps"] + state["activeapps"]]
    assert "mailbus-analyze" in apps, state
    assert state["aliveworkers"] == 2


@pytest.mark.spark
@pytest.mark.slow
def test_analyze_through_spark_connect_starts_no_jvm_in_the_caller(
    spark_processes: SparkProcesses, many_sessions: list[Path]
) -> None:
    """`mailbus analyze --remote sc://...` in a process where starting a JVM fails: the
    thin client (gRPC only) gets every table of several sessions, equal to polars', and
    no JVM gateway exists afterwards."""
    refuse_jvm = (
        "import pyspark.java_gateway, pyspark.core.context\n"
        "def refuse(*a, **k):\n"
        "    raise AssertionError('the Connect client tried to start a JVM')\n"
        "pyspark.java_gateway.launch_gateway = refuse\n"
        "pyspark.core.context.launch_gateway = refuse\n"
    )
    paths = [str(p) for p in many_sessions]
    expected = analysis.analyze(paths)
    args = ["analyze", *paths, "--remote", spark_processes.remote_url, "--format", "json"]
    run = _cli(*args, prelude=refuse_jvm)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "jvm in caller: False" in run.stderr
    assert "analyze (spark)" in run.stderr
    _assert_same_tables(_from_json(run.stdout, expected), expected)
    assert set(expected["topics"]["session"]) == {"gaps", "tiny", "tiny#1"}


# -- URLs and flags (no cluster needed) ------------------------------------------------
def _closed_port() -> int:
    port = free_port()
    with socket.socket() as probe:  # nothing listens there: connecting is refused
        assert probe.connect_ex((HOST, port)) != 0
    return port


@pytest.mark.timeout(60)
def test_unreachable_remote_fails_fast_with_a_clear_error(tiny_session: Path) -> None:
    url = f"sc://{HOST}:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(SparkUnreachableError, match=f"cannot reach {url}.*refused"):
        analysis.load(tiny_session, engine="spark", remote=url)
    assert time.monotonic() - started < 30  # a bound, not a timing claim: no long retries


@pytest.mark.timeout(60)
def test_unreachable_master_fails_before_starting_spark(
    tiny_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"spark://{HOST}:{_closed_port()}"
    assert main(["analyze", str(tiny_session), "--master", url]) == 2
    assert f"cannot reach {url}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:15002", "not a sc://HOST:PORT URL"),
        ("sc://", "names no host"),
        ("sc://host:notaport", "no valid port"),
        ("sc://a:1,b:2", "names one server"),
    ],
)
def test_malformed_remote_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_remote(url)


def test_master_urls() -> None:
    assert check_master("spark://h1:7077,h2") == [("h1", 7077), ("h2", 7077)]
    assert check_master("local[2]") == []
    with pytest.raises(ValueError, match="empty"):
        check_master(" ")
    with pytest.raises(ValueError, match="no valid port"):
        check_master("spark://h:x")


def test_master_and_remote_are_mutually_exclusive(
    tiny_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", str(tiny_session), "--master", "local[1]", "--remote", "sc://h:1"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert "--remote: not allowed with argument --master" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not both"):
        analysis.load(tiny_session, engine="spark", master="local[1]", remote="sc://h:1")


def test_a_remote_cannot_run_on_polars(
    tiny_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(tiny_session), "--engine", "polars", "--remote", "sc://h:1"]) == 2
    assert "needs engine spark" in capsys.readouterr().err


# -- many sessions at once (polars) ----------------------------------------------------
def _each_alone(paths: list[Path]) -> dict[str, pl.DataFrame]:
    alone = [analysis.analyze(analysis.load(p)) for p in paths]
    return {name: pl.concat([tables[name] for tables in alone]) for name in alone[0]}


def test_a_quoted_glob_is_expanded_sorted_and_equals_each_session_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [shutil.copytree(SAMPLES / n, tmp_path / n) for n in ("slow_service", "gaps", "demo")]
    (tmp_path / "notes.txt").write_text("not a session")  # a file: not matched
    dataset = analysis.load(str(tmp_path / "*"))
    assert [s.name for s in dataset.sessions] == ["demo", "gaps", "slow_service"]
    together = analysis.analyze(dataset)
    alone = _each_alone(sorted(paths))
    for name, frame in together.items():
        assert frame.height > 0
        assert_frame_equal(frame, alone[name])
    # The same through the command line, as a shell would hand it over unexpanded.
    assert main(["analyze", str(tmp_path / "*"), "--table", "topics", "--format", "json"]) == 0
    topics = json.loads(capsys.readouterr().out)["topics"]
    assert {row["session"] for row in topics} == {"demo", "gaps", "slow_service"}


def test_a_glob_matching_no_session_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SessionError, match="no session matches"):
        analysis.load(str(tmp_path / "nothing*"))
    assert main(["analyze", str(tmp_path / "nothing*")]) == 2
    assert "no session matches" in capsys.readouterr().err


# -- progress and cancel (the workbench's Cancel uses these) ---------------------------
def _cancel_a_long_job(spark: Any, running: Callable[[], bool]) -> BaseException | None:
    """Start a job of minutes in a thread, wait until `running()`, cancel; return what
    the job raised (None if it finished, which would be a failure)."""
    from mailbus.sessions.spark import cancel

    outcome: list[BaseException | None] = []

    def job() -> None:
        try:
            spark.range(0, 10**11, 1, 4).selectExpr("sum(id % 7) AS s").collect()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    eventually(running, 60, "the job's tasks to run")
    cancel(spark)
    thread.join(60)
    assert not thread.is_alive(), "the cancelled job is still running"
    return outcome[0]


@pytest.mark.spark
def test_a_classic_session_reports_task_progress_and_cancels(spark: Any) -> None:
    from mailbus.sessions.spark import task_progress

    def running() -> bool:
        counts = task_progress(spark)
        return counts is not None and counts[1] > 0

    raised = _cancel_a_long_job(spark, running)
    assert raised is not None and "cancel" in str(raised).lower()
    assert spark.range(3).count() == 3  # the session still works


@pytest.mark.spark
@pytest.mark.slow
def test_a_connect_session_streams_progress_and_interrupts(
    spark_processes: SparkProcesses,
) -> None:
    from mailbus.sessions.spark import connect, on_connect_progress, task_progress

    spark = connect(spark_processes.remote_url)
    reports: list[tuple[int, int]] = []
    stop = on_connect_progress(spark, lambda done, total: reports.append((done, total)))
    try:
        assert task_progress(spark) is None
        raised = _cancel_a_long_job(spark, lambda: any(total for _, total in reports))
        assert raised is not None
        assert "interrupt" in str(raised).lower() or "cancel" in str(raised).lower()
    finally:
        stop()
        spark.stop()

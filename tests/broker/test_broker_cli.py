"""`mailbus gateway run|check FILE.json`, as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

GATEWAY = {
    "modules": [
        {
            "name": "tick",
            "loader": "mailbus.broker.samples:Ticker",
            "args": {"count": 3, "period_s": 0, "content": "hello"},
        },
        {"name": "print", "loader": "mailbus.broker.samples:Printer", "args": {"prefix": "> "}},
    ],
    "links": [{"source": "tick", "sink": "print"}],
}


def mailbus_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mailbus", *args]


@pytest.fixture
def gateway_file(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(GATEWAY))
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # No options file from the environment: the in-process transport.
    return {k: v for k, v in os.environ.items() if not k.startswith("MAILBUS_")}


class Lines:
    """Collects a stream's lines on a thread, so the test can wait for one with a bound."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, predicate: object, timeout: float = 30.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.lines), timeout)  # type: ignore[operator]

    def join(self) -> None:
        self._thread.join(10)


@pytest.fixture
def running(gateway_file: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        mailbus_cmd("gateway", "run", str(gateway_file)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@pytest.mark.slow
def test_gateway_run_prints_then_stops_on_sigterm(running: subprocess.Popen[str]) -> None:
    out, err = Lines(running.stdout), Lines(running.stderr)
    assert out.wait_for(lambda lines: len(lines) >= 3), (out.lines, err.lines)
    assert err.wait_for(lambda lines: any("running tick, print" in x for x in lines))
    running.send_signal(signal.SIGTERM)
    assert running.wait(20) == 0
    out.join()
    err.join()
    assert out.lines == [f'> hello {{"seq": "{n}"}}' for n in range(3)]
    summary = [x.split() for x in err.lines if x.startswith("print ")]
    assert summary == [["print", "0", "3", "0", "0"]]  # queued delivered dropped failed


def test_gateway_check(gateway_file: Path, tmp_path: Path, env: dict[str, str]) -> None:
    ok = subprocess.run(
        mailbus_cmd("gateway", "check", str(gateway_file)),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "2 modules, 1 links, OK" in ok.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"modules": [{"name": "x", "loader": "nowhere_xyz:Thing"}]}))
    failed = subprocess.run(
        mailbus_cmd("gateway", "check", str(bad)),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert failed.returncode == 2
    assert "modules[0].loader: cannot import 'nowhere_xyz'" in failed.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 100_000, "JSON nested too deeply"),
        (
            json.dumps({"modules": [{"name": "x", "loader": "gw_cli_raises:Thing"}]}),
            "modules[0].loader: importing 'gw_cli_raises' failed: RuntimeError: at import",
        ),
        (
            json.dumps({"modules": [{"name": "x", "loader": "gw_cli_syntax:Thing"}]}),
            "modules[0].loader: importing 'gw_cli_syntax' failed: SyntaxError",
        ),
    ],
    ids=["nested", "runtime-error", "syntax-error"],
)
def test_gateway_check_reports_deep_json_and_broken_loaders(
    tmp_path: Path, env: dict[str, str], content: str, message: str
) -> None:
    (tmp_path / "gw_cli_raises.py").write_text('raise RuntimeError("at import")\n')
    (tmp_path / "gw_cli_syntax.py").write_text("def broken(:\n")
    path = tmp_path / "bad.json"
    path.write_text(content)
    paths = [str(tmp_path), *filter(None, [env.get("PYTHONPATH")])]
    env = {**env, "PYTHONPATH": os.pathsep.join(paths)}
    result = subprocess.run(
        mailbus_cmd("gateway", "check", str(path)),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_gateway_run_with_a_bad_file(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"modules": [{"name": "*", "loader": "a:b"}]}')
    result = subprocess.run(
        mailbus_cmd("gateway", "run", str(bad)),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "modules[0].name: '*' is reserved" in result.stderr
    missing = subprocess.run(
        mailbus_cmd("gateway", "run", str(tmp_path / "none.json")),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr


def test_gateway_run_prints_periodic_stats(gateway_file: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        mailbus_cmd("gateway", "run", str(gateway_file), "--stats-every", "0.05"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = Lines(proc.stdout), Lines(proc.stderr)
        headers = lambda lines: sum(x.startswith("module ") for x in lines)  # noqa: E731
        assert err.wait_for(lambda lines: headers(lines) >= 1), err.lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        err.join()
        out.join()
        assert headers(err.lines) >= 2  # periodic, then the final summary
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@pytest.mark.parametrize(
    "flags",
    [
        ["--stats-every", "1e999"],  # crashed: OverflowError from the wait
        ["--stats-every", "-1"],  # spun printing stats
        ["--stats-every", "nan"],
        ["--seconds", "nan"],
        ["--seconds", "0"],
    ],
)
def test_gateway_run_refuses_durations_that_are_not_positive_and_finite(
    gateway_file: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    from mailbus.cli import main

    with pytest.raises(SystemExit) as caught:  # argparse's usage error, before any start
        main(["gateway", "run", str(gateway_file), *flags])
    assert caught.value.code == 2
    assert "must be a positive finite number" in capsys.readouterr().err

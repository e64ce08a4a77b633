"""Every benchmark the documentation gives runs from the repository root, as a reader
would run it, and ends with its line of JSON figures (the runs are shared out over three
test files, SHARES, so that the suite's workers run them side by side).

Each runs in its smallest form (`--quick`, and smaller sizes where even that takes
minutes): the point is that a command that no longer starts (an import that only works
from tests/, a renamed option) fails here, not in a reader's shell. The figures
themselves are docs/benchmarks.md's matter; no test asserts a timing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 400

# Module -> the smallest runs of each of its documented commands.
SMOKE: dict[str, list[list[str]]] = {
    "intraprocess": [["--quick"]],
    "outbox": [["--quick"]],
    "postoffice": [["--quick", "--pairs", "1", "--rounds", "1"]],
    "stem": [["--quick"]],
    "broker": [["--quick"]],
    "find": [["--quick"]],
    "raw_recording": [["--quick", "--events", "20000"]],
    "sessions_many": [["--quick", "--sessions", "2", "--rounds", "1"]],
    # Not its `--cluster` command: at the smoke size it took 60-100 s of the suite's 15
    # minutes, starting the same standalone cluster that tests/sessions/test_spark_cluster.py
    # starts and analyses on (`mailbus.stacks`, as the benchmark does).
    "sessions": [["--quick", "--no-spark", "--events", "20000", "--sizes", "100k", "--no-100m"]],
    "workbench": [["--quick", "--rounds", "1"]],
    "notebook": [["--quick"]],
    "email_e2e": [["--quick"]],
    "email_routed": [["--quick"]],
    "email_scale": [["--quick", "--sizes", "1,2"]],
    "email_process_share": [["--quick", "--sizes", "1", "--order", "shared,own"]],
    "testing": [["--quick", "--messages", "5000", "--events", "5000"]],
    "cli": [["--quick"]],
    "foxglove": [["--quick"]],
    # 100 k events, not --quick's 1 M (whose comparison with the global replay alone
    # takes over a minute).
    "replay": [["--sizes", "100k", "--stretch", "1"]],
    "mcap": [["--events", "20000"]],
    "postoffice_wal": [["--letters", "5000", "--sync", "normal"]],
}
# Figures a smoke run must measure (a number, not null).
MEASURED = {"workbench": ("key_latency_p95_ms", "key_latency_p95_ms_10k_topics")}
NEEDS_MAIL = {"email_e2e", "email_routed", "email_scale", "email_process_share"}
NEEDS_SPARK = {"sessions_many"}


def documented() -> set[str]:
    names: set[str] = set()
    for doc in DOCS:
        names |= set(re.findall(r"python -m bench\.([a-z0-9_]+)", doc.read_text()))
    return names


# Which test file runs which benchmarks: about two minutes each.
SHARES = (
    {"sessions", "email_e2e", "cli", "find", "stem", "foxglove", "mcap"},
    {"sessions_many", "postoffice", "email_scale", "raw_recording", "outbox", "replay"},
    {
        "workbench",
        "email_process_share",
        "notebook",
        "testing",
        "email_routed",
        "intraprocess",
        "broker",
        "postoffice_wal",
    },
)


def cases(share: int) -> list[object]:
    cases: list[object] = []
    for module, runs in SMOKE.items():
        if module not in SHARES[share]:
            continue
        for n, args in enumerate(runs):
            # The run's own bound (TIMEOUT_S) ends it with its output, before the
            # suite's 300 s per test would end it with none.
            marks = [pytest.mark.slow, pytest.mark.timeout(TIMEOUT_S + 30)]
            if module in NEEDS_MAIL:
                marks.append(pytest.mark.mailstack)
            if module in NEEDS_SPARK or "--cluster" in args:
                marks.append(pytest.mark.spark)
            cases.append(pytest.param(module, args, marks=marks, id=f"{module}-{n}"))
    return cases


def run_documented(module: str, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    figures = json.loads(lines[-1])
    assert isinstance(figures, dict) and figures
    for key in MEASURED.get(module, ()):
        assert isinstance(figures.get(key), int | float), f"{key}: {figures.get(key)!r}"

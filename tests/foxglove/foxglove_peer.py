"""What the Foxglove tests share: the independent client (the reference FoxgloveClient
of @foxglove/ws-protocol under Node, installed from the committed package-lock.json by
`npm ci` when scripts/test has not done it already), and `mailbus foxglove` started as
a real process whose first line names its port. (A module of its own name: every test
directory has a conftest.)"""

from __future__ import annotations

import fcntl
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PEER = Path(__file__).resolve().parent / "peer"
NPM_CI_TIMEOUT_S = 300
START_S = 60.0  # the first line; a session is read first (polars), slow on a loaded machine
STOP_S = 10.0
SUBPROTOCOLS = ("foxglove.sdk.v1", "foxglove.websocket.v1")


def install_peer() -> Path:
    """The peer's directory with its node_modules installed (`npm ci`, once; a lock
    keeps xdist workers from installing over each other)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed (scripts/system-packages.txt installs them)")
    lock = Path(tempfile.gettempdir()) / "mailbus-foxglove-npm-ci.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not (PEER / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--silent"],
                cwd=PEER,
                check=True,
                timeout=NPM_CI_TIMEOUT_S,
            )
    return PEER


def probe(peer: Path, plan: dict[str, Any], seconds: float = 60.0) -> dict[str, Any]:
    """Run the reference client on `plan` (see peer/probe.mjs); what it saw. Fails with
    what it saw when the plan was not done within `seconds`."""
    plan = {**plan, "planMs": int(seconds * 1000)}
    done = subprocess.run(
        ["node", str(peer / "probe.mjs"), json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=seconds + 20,
        check=False,
    )
    try:
        seen: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(
            f"the probe printed no result: {done.stdout[:2000]!r} {done.stderr[-2000:]!r}"
        ) from None
    if done.returncode != 0:
        shown = {k: v for k, v in seen.items() if k != "messages"}
        counts = {topic: len(m) for topic, m in seen.get("messages", {}).items()}
        raise AssertionError(f"the plan was not done in {seconds:g} s: {counts} {shown}")
    return seen


@dataclass
class Bridge:
    process: subprocess.Popen[str]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_bridge(args: Sequence[str], env: dict[str, str], log: Path) -> Bridge:
    """`python -m mailbus ... foxglove --port 0 ...`; stderr goes to `log`."""
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "mailbus", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        line = process.stdout.readline() if selector.select(START_S) else ""
    match = re.search(r"serving ws://127\.0\.0\.1:(\d+)", line)
    if match is None:
        stop(process)
        raise AssertionError(f"mailbus foxglove did not start: {line!r} {log.read_text()!r}")
    return Bridge(process, int(match.group(1)), log)


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM to the process group, SIGKILL if it is still there after STOP_S."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_S)
    if process.stdout is not None:
        process.stdout.close()

"""A PostOffice system as a user runs one: the daemon on a free loopback port and the
demo's participants in a process of their own (`mailbus --config demo.toml demo`), both
real subprocesses, stopped (bounded) when the journey ends. The workbench attaches with
a config of its own in the same group."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "journey-pw"
# Cheap scrypt for the test daemon (its default is 2**14); the scheme is the same.
HASH_COST = "8"
START_S = 30.0  # the daemon's first line, on a loaded machine
STOP_S = 10.0


@dataclass(frozen=True)
class PostOfficeSystem:
    port: int
    workbench_config: Path  # the workbench's own box in the demo's group
    logs: Path  # the subprocesses' output, for a failure's message

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')}" for p in self.logs.iterdir()
        )


def environment(tmp_path: Path) -> dict[str, str]:
    """What the daemon, the demo and the workbench read: one password, no user config."""
    return {
        "MAILBUS_POSTOFFICE_PASSWORD": PASSWORD,
        "MAILBUS_CONFIG_FILE": "",
        "MAILBUS_WORKBENCH_DIR": str(tmp_path / "config"),
    }


def config(path: Path, port: int, box: str) -> Path:
    path.write_text(f'transport = "postoffice"\n[postoffice]\nport = {port}\nbox = "{box}"\n')
    return path


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "mailbus", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group, SIGKILL if it is still there after STOP_S."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_S)


def start_daemon(store: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """`mailbus postoffice serve --port 0`: the port is the one its first line names."""
    daemon = subprocess.Popen(
        [
            *(sys.executable, "-m", "mailbus", "postoffice", "serve", "--port", "0"),
            *("--hash-cost", HASH_COST, "--store", str(store)),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert daemon.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(daemon.stdout, selectors.EVENT_READ)
        line = daemon.stdout.readline() if selector.select(START_S) else b""
    match = re.search(rb"listening on 127\.0\.0\.1:(\d+)", line)
    if match is None:
        stop(daemon)
        daemon.stdout.close()
        raise AssertionError(f"the daemon did not start within {START_S:g} s: {line!r}")
    return daemon, int(match.group(1))


@contextmanager
def postoffice_demo(tmp_path: Path) -> Iterator[PostOfficeSystem]:
    """The daemon and the demo running; the workbench's config to attach with."""
    env = {**os.environ, **environment(tmp_path)}
    logs = tmp_path / "logs"
    logs.mkdir()
    with ExitStack() as running:
        daemon, port = start_daemon(tmp_path / "po" / "postoffice.db", env)
        running.callback(stop, daemon)
        if daemon.stdout is not None:
            running.callback(daemon.stdout.close)
        demo_config = config(tmp_path / "demo.toml", port, "lab.demo")
        demo = spawn(["--config", str(demo_config), "demo"], env, logs / "demo.log")
        running.callback(stop, demo)  # stopped before the daemon
        yield PostOfficeSystem(port, config(tmp_path / "workbench.toml", port, "lab.wb"), logs)

"""Fixtures for the PostOffice tests: a daemon on a random loopback port with its store in
a temporary directory, clients, and a raw socket that speaks bytes."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.server import ServerThread
from mailbus.postoffice.store import HashParams
from mailbus.trace import TraceEvent, Tracer

# The shared bounded wait under this directory's old name (the call sites keep it
# until the test files are next reorganised).
from waiting import eventually as wait_until

# Cheap scrypt for tests (the daemon's default is 2**14); the scheme is the same.
TEST_HASH = HashParams(log2_n=8, r=8, p=1)
REPO = Path(__file__).resolve().parents[2]


def daemon_config(tmp_path: Path, **overrides: object) -> ServerConfig:
    values: dict[str, object] = {
        "store_path": tmp_path / "store" / "postoffice.db",
        "port": 0,
        "hash_params": TEST_HASH,
        "auth_delay_s": 0.01,
        "auth_delay_max_s": 0.05,
        "comm_timeout_s": 5.0,
    }
    values.update(overrides)
    return ServerConfig(**values)  # type: ignore[arg-type]


class Daemon:
    """An in-process daemon plus what it traced."""

    def __init__(self, config: ServerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.events: list[TraceEvent] = []
        tracer = Tracer()
        tracer.add_listener(self.events.append)
        self.thread = ServerThread(config, tracer, clock)

    @property
    def port(self) -> int:
        return self.thread.port

    @property
    def office(self):  # type: ignore[no-untyped-def]
        return self.thread.office

    def kinds(self) -> list[str]:
        return [e.kind for e in list(self.events)]

    def client(self, **kwargs: object) -> PostOfficeClient:
        return PostOfficeClient("127.0.0.1", self.port, timeout=10.0, **kwargs)  # type: ignore[arg-type]

    def raw(self) -> Raw:
        return Raw(self.port)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        wait_until(lambda: self.thread.call(predicate), timeout)


class Raw:
    """A plain socket for byte-exact conversations."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exactly(self, count: int, timeout: float = 10.0) -> bytes:
        data = b""
        self.sock.settimeout(timeout)
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise AssertionError(f"connection closed after {data!r}, wanted {count} bytes")
            data += chunk
        return data

    def exchange(self, data: bytes, reply: bytes) -> None:
        """Send `data` and assert the daemon answers exactly `reply`."""
        self.send(data)
        got = self.recv_exactly(len(reply))
        assert got == reply, f"sent {data!r}: expected {reply!r}, got {got!r}"

    def at_eof(self, timeout: float = 10.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def make_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    daemons: list[Daemon] = []

    def make(clock: Callable[[], float] = time.monotonic, **overrides: object) -> Daemon:
        daemon = Daemon(daemon_config(tmp_path, **overrides), clock)
        daemon.thread.start()
        daemons.append(daemon)
        return daemon

    yield make
    for daemon in daemons:
        daemon.thread.stop()


@pytest.fixture
def daemon(make_daemon: Callable[..., Daemon]) -> Daemon:
    return make_daemon()


class DaemonProcess:
    """`mailbus postoffice serve` in a child process (crash and load tests)."""

    def __init__(self, store: Path, *extra: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mailbus",
                "postoffice",
                "serve",
                "--port",
                "0",
                "--store",
                str(store),
                "--hash-cost",
                str(TEST_HASH.log2_n),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
        )
        assert self.proc.stdout is not None
        line = self._readline(30.0)
        match = re.search(rb"listening on 127\.0\.0\.1:(\d+)", line)
        if match is None:
            self.kill()
            raise AssertionError(f"daemon did not start: {line!r}")
        self.port = int(match.group(1))

    def _readline(self, timeout: float) -> bytes:
        import selectors

        assert self.proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            self.kill()
            raise AssertionError("daemon printed nothing before the deadline")
        return self.proc.stdout.readline()

    def client(self, **kwargs: object) -> PostOfficeClient:
        return PostOfficeClient("127.0.0.1", self.port, timeout=30.0, **kwargs)  # type: ignore[arg-type]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def spawn_daemon(tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    procs: list[DaemonProcess] = []

    def spawn(*extra: str, store: Path | None = None) -> DaemonProcess:
        proc = DaemonProcess(store or tmp_path / "proc-store" / "postoffice.db", *extra)
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        proc.kill()
        for stream in (proc.proc.stdout, proc.proc.stderr):
            if stream is not None:
                stream.close()


def assert_close_wakes_a_receive(daemon: Daemon, transport: Any, box: str) -> None:
    """A receive blocked on `box` in another thread ends, with one outcome (a result or
    a TransportError), when `transport` is closed; the daemon lets the box go."""
    from mailbus.errors import TransportError

    outcome: list[object] = []

    def receive() -> None:
        try:
            outcome.append(transport.receiver.receive(60))
        except TransportError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=receive)
    thread.start()
    daemon.wait_for(lambda: daemon.office.boxes[box].holder is not None)
    wait_until(lambda: bool(daemon.office.boxes[box].holder._waiting_mail))
    transport.close()  # the sender closes first, so no wake-up letter can go
    thread.join(10)
    assert not thread.is_alive() and len(outcome) == 1
    daemon.wait_for(lambda: daemon.office.boxes[box].holder is None)

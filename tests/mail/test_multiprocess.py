"""Participants in separate processes, over TLS through the real stack, sharing one
account (the whole system on one inbox): a publisher and a subscriber; a service
server and a client; an observer that pairs every request with its response.

Each process reads a TOML file with no password in it and the password from
MAILBUS_PASSWORD, as a user would configure it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus.stacks.mailstack import MailStack, User

pytestmark = pytest.mark.mailstack

PARTICIPANT = str(Path(__file__).with_name("participant.py"))


def write_config(path: Path, stack: MailStack, user: User, *mail: str) -> Path:
    path.write_text(
        "\n".join(
            [
                'transport = "email"',
                f'url-smtp = "{stack.smtps_url}"',
                f'url-imap = "{stack.imaps_url}"',
                f'username = "{user.address}"',
                f'ca-file = "{stack.ca_file}"',
                "polling-period-ms = 10",
                "[recipients]",
                f'to = ["{user.address}"]',
                "[mail]",
                "reconnect-max-s = 0.5",
                *mail,
                "",
            ]
        )
    )
    return path


class Proc:
    """A participant process; its stdout is read by a thread into a list of lines."""

    def __init__(self, role: str, config: Path, name: str, count: int, password: str) -> None:
        env = {**os.environ, "MAILBUS_PASSWORD": password}
        env.pop("MAILBUS_CONFIG_FILE", None)
        self.proc = subprocess.Popen(
            [sys.executable, PARTICIPANT, role, str(config), name, str(count), "40"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.strip())
                self._cond.notify_all()
        with self._cond:
            self.lines.append("<EOF>")
            self._cond.notify_all()

    def wait_line(self, predicate: Any, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or "<EOF>" in self.lines:
                    err = self.proc.stderr.read() if self.proc.poll() is not None else ""  # type: ignore[union-attr]
                    raise AssertionError(f"no such line; got {self.lines}; stderr: {err}")
                self._cond.wait(left)

    def ready(self) -> None:
        self.wait_line(lambda line: line == "READY")

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        line = self.wait_line(lambda line: line.startswith("{"), timeout)
        code = self.proc.wait(timeout)
        assert code == 0, f"exit {code} (3: not done in time); it reported {line[:2000]}"
        data: dict[str, Any] = json.loads(line)
        return data

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:  # also when the test failed
        proc.kill()


def test_publisher_and_subscriber_processes(
    smtp_stack: MailStack, user: User, tmp_path: Path, procs: list[Proc]
) -> None:
    config = write_config(tmp_path / "mailbus.toml", smtp_stack, user)
    assert user.password not in config.read_text()
    subscriber = Proc("subscribe", config, "news", 20, user.password)
    procs.append(subscriber)
    subscriber.ready()  # its receiver is at UIDNEXT now
    publisher = Proc("publish", config, "news", 20, user.password)
    procs.append(publisher)
    published = publisher.result()
    assert published["flushed"] is True and len(set(published["ids"])) == 20
    received = subscriber.result()
    assert sorted(received["bodies"]) == sorted(f"message {i}" for i in range(20))
    assert received["counters"].get("duplicates", 0) == 0
    # A subscriber that joins late catches up from the start of the inbox.
    late_config = write_config(tmp_path / "late.toml", smtp_stack, user, "start-uid = 1")
    late = Proc("subscribe", late_config, "news", 20, user.password)
    procs.append(late)
    caught_up = late.result()
    assert sorted(caught_up["bodies"]) == sorted(f"message {i}" for i in range(20))


def test_server_client_and_observer_processes(
    smtp_stack: MailStack, user: User, tmp_path: Path, procs: list[Proc]
) -> None:
    config = write_config(tmp_path / "mailbus.toml", smtp_stack, user)
    calls = 6
    server = Proc("serve", config, "echo", calls, user.password)
    observer = Proc("observe", config, "echo", calls, user.password)
    procs.extend([server, observer])
    server.ready()
    observer.ready()
    client = Proc("call", config, "echo", calls, user.password)
    procs.append(client)
    answers = client.result()["answers"]
    assert answers == [f"echo request {i}" for i in range(calls)]
    assert server.result()["served"] == calls
    seen = observer.result()["seen"]
    requests = [s for s in seen if s["kind"] == "request"]
    responses = [s for s in seen if s["kind"] == "response"]
    assert len(requests) == calls and len(responses) == calls
    # Every request is answered by exactly one response naming it, and nothing else.
    request_ids = {r["id"] for r in requests}
    assert len(request_ids) == calls
    assert sorted(r["reply_to"] for r in responses) == sorted(request_ids)


def test_mail_check_command_logs_in_and_round_trips(
    smtp_stack: MailStack, user: User, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "mailbus.toml", smtp_stack, user)
    command = [sys.executable, "-m", "mailbus", "--config", str(config), "mail-check"]
    env = {**os.environ, "MAILBUS_PASSWORD": user.password}
    ok = subprocess.run(
        [*command, "--round-trip", "--timeout", "20"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "login as" in ok.stdout and "round trip:" in ok.stdout
    bad = subprocess.run(
        command,
        env={**env, "MAILBUS_PASSWORD": "wrong-password-123"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert "refused" in bad.stderr and "wrong-password-123" not in bad.stderr + bad.stdout

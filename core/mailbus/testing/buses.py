"""The bus a test runs on: a context on the in-process transport, a real PostOffice
daemon, a real mail server, or the user's own system (an options file).

Every bus is built the same way: options as a TOML mapping (which is also what a child
process of the system under test is given, with its own name), the transport the
options name, and a `FaultSender` around its sender so that `faults()` can act on what
the test and its in-process participants send. Before a test uses it, a bus sends a
probe to itself and waits for it: the receiving side is live before the first publish.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import selectors
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailbus.context import Context
from mailbus.inprocess import in_process_transport
from mailbus.options import Options, load_options, options_from_mapping
from mailbus.publisher import Publisher
from mailbus.registry import TRANSPORTS, load
from mailbus.service import ServiceClient, ServiceServer
from mailbus.subscription import Subscription
from mailbus.testing.faults import FaultSender
from mailbus.trace import Tracer
from mailbus.transport import Transport
from mailbus.waitset import wait_for_message

TRANSPORT_NAMES = ("inprocess", "postoffice", "mail")
PROBE_TOPIC = "_mailbus/testing/probe"
PROBE_TIMEOUT_S = 30.0
DAEMON_HASH_COST = 8  # cheap scrypt: the daemon lives for one test run
_BOX_PART = re.compile(r"[^a-zA-Z0-9]")


class BusError(RuntimeError):
    """The bus could not be set up; the message says what to fix."""


def toml_text(mapping: Mapping[str, Any], prefix: str = "") -> str:
    """`mapping` (scalars, lists of scalars, tables within tables) as TOML."""
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            tables.append((f"{prefix}{json.dumps(key)}", value))
        else:
            lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
    for name, table in tables:
        lines.append(f"[{name}]")
        lines.append(toml_text(table, name + ".").rstrip("\n"))
    return "\n".join(line for line in lines if line) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's string escapes are TOML's basic-string escapes
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


@dataclass(slots=True)
class ChildConfig:
    """What a participant process of the system under test is started with."""

    options: Mapping[str, Any] | None  # a TOML mapping to write, or None: `config_file`
    environment: Mapping[str, str] = field(default_factory=dict)  # secrets travel here
    config_file: str = ""


@dataclass(slots=True)
class Bus:
    """A test's context and what its processes need to join the same system."""

    transport: str
    context: Context
    faults: FaultSender
    child: Callable[[str], ChildConfig]  # by participant name; raises BusError in-process
    closers: list[Callable[[], None]] = field(default_factory=list)
    # Stop and start the server the bus goes through, for an outage (the mail stack's SMTP).
    server_switch: tuple[Callable[[], None], Callable[[], None]] | None = None

    @property
    def crosses_processes(self) -> bool:
        return self.transport != "inprocess"

    def publisher(self, topic: str) -> Publisher:
        return self.context.publisher(topic)

    def subscription(self, topic: str) -> Subscription:
        return self.context.subscription(topic)

    def client(self, service: str) -> ServiceClient:
        return self.context.client(service)

    def server(self, service: str) -> ServiceServer:
        return self.context.server(service)

    def close(self) -> None:
        self.context.shutdown()
        for close in reversed(self.closers):
            close()


def open_bus(transport: str, options: Options, child: Callable[[str], ChildConfig]) -> Bus:
    """A started, probed bus on `options`."""
    tracer = Tracer()
    if options.transport == "inprocess":
        inner = in_process_transport()
    else:
        factory = load(TRANSPORTS[options.transport].factory, f"transport {options.transport!r}")
        inner = factory(options, tracer)
    faults = FaultSender(inner.sender)
    context = Context(options, transport=Transport(faults, inner.receiver, inner.name))
    context.tracer = tracer  # the transport traces to the context's listeners
    context.init()
    bus = Bus(transport, context, faults, child)
    try:
        probe(context)
    except BaseException:
        bus.close()
        raise
    return bus


def probe(context: Context, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Send a message to ourselves and wait for it: the receiving side works."""
    subscription = context.subscription(PROBE_TOPIC)
    try:
        token = secrets.token_hex(8)
        context.publisher(PROBE_TOPIC).publish(token)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            message = wait_for_message(subscription, left)
            if message is not None and message.body == token:
                return
        raise BusError(
            f"the bus on {context.transport_name} did not deliver a message to itself "
            f"within {timeout} s: is the server reachable?"
        )
    finally:
        subscription.close()


# -- in-process ----------------------------------------------------------------------------
def inprocess_bus() -> Bus:
    def child(name: str) -> ChildConfig:
        raise BusError(
            f"participant {name!r} is a process, and a process cannot join the in-process "
            "bus: run with --mailbus-transport=postoffice (or mail), mark the test "
            '@pytest.mark.mailbus_transports("postoffice"), or start a callable instead'
        )

    options = options_from_mapping({"transport": "inprocess", "name": "test"})
    return open_bus("inprocess", options, child)


# -- PostOffice ----------------------------------------------------------------------------
class PostOfficeDaemon:
    """`mailbus postoffice serve` on a free loopback port, its store under `directory`."""

    def __init__(self, directory: Path, timeout: float = 30.0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.password = secrets.token_hex(12)
        self.log_path = directory / "postoffice-daemon.log"
        self._log = self.log_path.open("wb")
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
                str(directory / "postoffice.db"),
                "--hash-cost",
                str(DAEMON_HASH_COST),
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.port = self._read_port(timeout)

    def _read_port(self, timeout: float) -> int:
        stdout = self.proc.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            line = stdout.readline() if selector.select(timeout) else b""
        match = re.search(rb"listening on 127\.0\.0\.1:(\d+)", line)
        if match is None:
            self.stop()
            log = self.log_path.read_text(errors="replace")[-2000:]
            raise BusError(f"the PostOffice daemon did not start ({line!r}):\n{log}")
        return int(match.group(1))

    def options(self, group: str, box: str, name: str) -> dict[str, Any]:
        """A participant's options, without the password (MAILBUS_POSTOFFICE_PASSWORD)."""
        return {
            "transport": "postoffice",
            "name": name,
            "postoffice": {
                "host": "127.0.0.1",
                "port": self.port,
                "box": f"{group}.{box}",
                "idle-wait-s": 0.2,
            },
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


def box_name(name: str) -> str:
    return _BOX_PART.sub("", name) or "p"


def postoffice_bus(daemon: PostOfficeDaemon) -> Bus:
    # A group per test: tests never see each other's letters.
    group = "t" + secrets.token_hex(5)
    secret = {"MAILBUS_POSTOFFICE_PASSWORD": daemon.password}

    def child(name: str) -> ChildConfig:
        box = box_name(name) + secrets.token_hex(2)  # unique: a name may be started twice
        return ChildConfig(daemon.options(group, box, name), secret)

    raw = daemon.options(group, "test", "test")
    # In memory only: the files written for the system's processes carry no password.
    raw["postoffice"] = {**raw["postoffice"], "password": daemon.password}
    return open_bus("postoffice", options_from_mapping(raw), child)


# -- a real mail server --------------------------------------------------------------------
def mail_bus(stack: Any) -> Bus:
    """On a loopback mail stack (mailbus.stacks.mailstack.MailStack): a fresh account
    that the whole system shares, as the multi-process mail tests do."""
    user = stack.add_user()
    raw: dict[str, Any] = {
        "transport": "email",
        "name": "test",
        "url-smtp": stack.smtps_url,
        "url-imap": stack.imaps_url,
        "username": user.address,
        "ca-file": stack.ca_file,
        "polling-period-ms": 10,
        "recipients": {"to": [user.address]},
        "mail": {"reconnect-max-s": 0.5},
    }
    secret = {"MAILBUS_PASSWORD": user.password}

    def child(name: str) -> ChildConfig:
        return ChildConfig({**raw, "name": name}, secret)

    bus = open_bus("mail", options_from_mapping(raw, secret), child)
    bus.server_switch = (stack.stop_smtp, stack.start_smtp)
    return bus


# -- the user's own system -----------------------------------------------------------------
def configured_bus(path: str) -> Bus:
    """On the options in `path` (and MAILBUS_* variables), as the user's system runs.

    Each participant, the test's own included, gets the file's options under its own
    name and, on PostOffice, a box of its own in the file's group (two participants
    cannot hold one box). The processes' copies carry no password: those travel in
    their environment."""
    options = load_options(path)
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BusError(f"--mailbus-config {path}: {exc}") from None

    def named(name: str) -> dict[str, Any]:
        mine: dict[str, Any] = {**raw, "name": name}
        table = mine.get("postoffice")
        if options.transport == "postoffice" and isinstance(table, dict):
            box = str(table.get("box", ""))
            group = str(table.get("group", "")) or box.rpartition(".")[0]
            if group:
                box = f"{group}.{box_name(name)}{secrets.token_hex(2)}"
                mine["postoffice"] = {**table, "box": box, "group": group}
        return mine

    def child(name: str) -> ChildConfig:
        mine = named(name)
        secret = {}
        if "password" in mine:
            secret["MAILBUS_PASSWORD"] = str(mine.pop("password"))
        table = mine.get("postoffice")
        if isinstance(table, dict) and "password" in table:
            secret["MAILBUS_POSTOFFICE_PASSWORD"] = str(table["password"])
            mine["postoffice"] = {k: v for k, v in table.items() if k != "password"}
        return ChildConfig(mine, secret)

    transport = "mail" if options.transport == "email" else options.transport
    return open_bus(transport, options_from_mapping(named("test"), os.environ), child)

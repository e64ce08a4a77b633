"""The `system` fixture: the user's own participants, started for a test and stopped
after it.

A participant is a command (a process, given the bus's options in a file named by
MAILBUS_CONFIG_FILE, its name in MAILBUS_NAME and a short announcement period) or a
callable `target(context, stop_event)` run on a thread with the test's own context (the
only way onto the in-process bus); a participant file (`x.py`) or module
(`python -m x`) with a `run(context, stop)` is a process on the other transports and
its `run` on a thread in-process. `start` returns once the participant announces the
entities named in `ready` (`"publisher:sensors/temp"`, `"server:thermo/convert"`, or a
bare name for any entity), read from the participant announcements (mailbus.presence),
as ROS's ReadyToTest waits for its nodes. Each process's output goes to a file whose tail
is shown with a failed test. `env` reaches a thread participant through the test
process's environment, set for the test and restored after it.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

from mailbus.context import Context
from mailbus.envelope import Message
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.presence import PresenceError, PresenceState, decode
from mailbus.testing.buses import Bus, toml_text
from mailbus.testing.watch import Watch

ANNOUNCE_PERIOD_S = 0.2  # a participant of a test announces this often
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
OUTPUT_TAIL_LINES = 40
ENTITY_KINDS = {"publisher", "subscription", "server", "client"}
ALIASES = {"topic": "publisher", "service": "server"}

Target = Callable[[Context, threading.Event], None]


class ParticipantError(AssertionError):
    """A participant did not start or did not become ready; says which and shows its output."""


def parse_ready(spec: str) -> tuple[str, str]:
    """`kind:name` (kind `*` for a bare name)."""
    kind, sep, name = spec.partition(":")
    if not sep:
        return "*", spec
    kind = ALIASES.get(kind, kind)
    if kind not in ENTITY_KINDS:
        known = ", ".join(sorted(ENTITY_KINDS))
        raise ValueError(f"ready={spec!r}: the kind is one of {known}, or give a bare name")
    return kind, name


def participant_function(path: Path) -> Target:
    """`run(context, stop)` of the participant file at `path`."""
    spec = importlib.util.spec_from_file_location(f"mailbus_participant_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ParticipantError(f"no participant file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = getattr(module, "run", None)
    if not callable(run):
        raise ParticipantError(
            f"{path} has no run(context, stop) function, which the in-process bus calls "
            "(a process cannot join it)"
        )
    return cast(Target, run)


def module_function(module: str) -> Target:
    """`run(context, stop)` of the participant module named `module` (`python -m`)."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise ParticipantError(f"no participant module {module} ({exc})") from None
    run = getattr(loaded, "run", None)
    if not callable(run):
        raise ParticipantError(
            f"{module} has no run(context, stop) function, which the in-process bus calls "
            "(a process cannot join it)"
        )
    return cast(Target, run)


def python_module(argv: Sequence[str]) -> str | None:
    """The module of a `python -m module` command (nothing else after it), else None."""
    if len(argv) == 3 and argv[0] == "python" and argv[1] == "-m":
        return argv[2]
    return None


def _has(entities: set[tuple[str, str]], wanted: tuple[str, str]) -> bool:
    kind, name = wanted
    return wanted in entities if kind != "*" else any(n == name for _, n in entities)


class Participant:
    def __init__(self, name: str, ready: Sequence[str]) -> None:
        self.name = name
        self.ready = [parse_ready(r) for r in ready]
        self.output_path: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.thread: threading.Thread | None = None
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    @property
    def running(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.thread is not None and self.thread.is_alive()

    def output(self, lines: int = OUTPUT_TAIL_LINES) -> str:
        if self.output_path is None or not self.output_path.exists():
            return "" if self.error is None else repr(self.error)
        text = self.output_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(STOP_TIMEOUT_S)
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT_S)


class System:
    def __init__(self, bus: Bus, directory: Path) -> None:
        self.bus = bus
        self.directory = directory
        self.participants: list[Participant] = []
        self._announced: dict[str, set[tuple[str, str]]] = {}
        self._cond = threading.Condition()
        self._watch: Watch | None = None
        self._logs: list[IO[bytes]] = []
        # Variables set for participants on threads, and the values they had before.
        self._saved_environment: dict[str, str | None] = {}
        self._environment_set: set[str] = set()

    def _on_announcement(self, message: Message) -> None:
        try:
            announcement = decode(message.body)
        except PresenceError:
            return
        entities = {(e.kind, e.name) for e in announcement.entities}
        with self._cond:
            if announcement.state is PresenceState.GOODBYE:
                self._announced.pop(announcement.name, None)
            else:
                self._announced[announcement.name] = entities
            self._cond.notify_all()

    def start(
        self,
        target: str | Path | Sequence[str] | Target,
        *,
        name: str | None = None,
        ready: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout: float = READY_TIMEOUT_S,
    ) -> Participant:
        """Start a participant and wait until it announces every entity in `ready`."""
        if self._watch is None:
            self._watch = Watch(self.bus.context, PARTICIPANTS_TOPIC, self._on_announcement)
        in_process = not self.bus.crosses_processes
        module = python_module(shlex.split(target)) if isinstance(target, str) else None
        on_thread = callable(target) or (
            in_process and (module is not None or str(target).endswith(".py"))
        )
        if env and on_thread:
            # A thread has the test process's environment: `env` goes there for the
            # test (before a participant file is loaded, so that it reads it too).
            self._set_environment(env, name or str(getattr(target, "__name__", target)))
        if in_process and isinstance(target, str | Path) and str(target).endswith(".py"):
            # A participant file on the in-process bus: its run(context, stop) on a
            # thread, since a process cannot join that bus.
            path = Path(cwd or ".") / str(target)
            target = participant_function(path)
            name = name or path.stem
        elif in_process and module is not None:
            target = module_function(module)
            name = name or module.rsplit(".", 1)[-1]
        if callable(target):
            label = name or str(getattr(target, "__name__", "participant"))
            participant = Participant(label, list(ready))
            self.participants.append(participant)
            self._start_thread(participant, target)
        else:
            if isinstance(target, Path):
                target = [str(target)]
            argv = shlex.split(target) if isinstance(target, str) else [str(a) for a in target]
            if not argv:
                raise ValueError("system.start: an empty command")
            if argv[0].endswith(".py"):
                argv.insert(0, sys.executable)
            elif argv[0] == "python":  # the test's own interpreter, as for a .py file
                argv[0] = sys.executable
            program = Path(argv[1] if argv[0] == sys.executable else argv[0]).stem
            label = name or (module.rsplit(".", 1)[-1] if module else program)
            participant = Participant(label, list(ready))
            self.participants.append(participant)
            self._start_process(participant, argv, env or {}, cwd)
        self._wait_ready(participant, timeout)
        return participant

    def from_file(self, path: str | Path, timeout: float = READY_TIMEOUT_S) -> list[Participant]:
        """Start the `[[participant]]` tables of a TOML file (name, command, ready, cwd
        relative to the file, env) in their order."""
        path = Path(path)
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"system file {path}: {exc}") from None
        entries = table.get("participant")
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"system file {path}: no [[participant]] table")
        started = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or "command" not in entry:
                raise ValueError(f"system file {path}: participant {i + 1} has no command")
            cwd = path.parent / str(entry.get("cwd", "."))
            started.append(
                self.start(
                    entry["command"],
                    name=entry.get("name"),
                    ready=entry.get("ready", ()),
                    env={str(k): str(v) for k, v in entry.get("env", {}).items()},
                    cwd=cwd,
                    timeout=timeout,
                )
            )
        return started

    def _set_environment(self, env: Mapping[str, str], who: str) -> None:
        for key, value in env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key:
                raise ValueError(f"system.start: env takes names and values as text, not {key!r}")
            current = os.environ.get(key)
            if key in self._environment_set and current != value:
                raise ValueError(
                    f"system.start: {who} wants {key}={value!r}, but a participant started "
                    f"before it runs with {key}={current!r}: participants on threads share "
                    "the test process's environment (give them different variables, or "
                    "run them as processes on --mailbus-transport=postoffice)"
                )
        for key, value in env.items():
            if key not in self._saved_environment:
                self._saved_environment[key] = os.environ.get(key)
            os.environ[key] = value
            self._environment_set.add(key)

    def _restore_environment(self) -> None:
        for key, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_environment.clear()
        self._environment_set.clear()

    def _start_thread(self, participant: Participant, target: Target) -> None:
        def run() -> None:
            try:
                target(self.bus.context, participant.stop_event)
            except BaseException as exc:
                participant.error = exc

        participant.thread = threading.Thread(target=run, name=participant.name, daemon=True)
        participant.thread.start()

    def _start_process(
        self,
        participant: Participant,
        argv: list[str],
        env: Mapping[str, str],
        cwd: str | Path | None,
    ) -> None:
        child = self.bus.child(participant.name)
        config = child.config_file
        if child.options is not None:
            config_path = self.directory / f"{participant.name}.toml"
            config_path.write_text(toml_text(child.options), encoding="utf-8")
            config = str(config_path)
        environment: dict[str, Any] = {
            **os.environ,
            "MAILBUS_CONFIG_FILE": config,
            "MAILBUS_NAME": participant.name,
            "MAILBUS_ANNOUNCE_PERIOD_S": str(ANNOUNCE_PERIOD_S),
            "PYTHONUNBUFFERED": "1",
            **child.environment,
            **env,
        }
        participant.output_path = self.directory / f"{participant.name}.out"
        log = participant.output_path.open("wb")
        self._logs.append(log)
        try:
            participant.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=cwd
            )
        except OSError as exc:
            raise ParticipantError(
                f"could not start {participant.name} ({argv!r}): {exc}"
            ) from None

    def _entities_of(self, participant: Participant) -> set[tuple[str, str]]:
        if participant.thread is not None:
            ctx = self.bus.context
            found = {("publisher", p.topic) for p in ctx.announced_publishers}
            found |= {("subscription", s.topic) for s in ctx.subscriptions}
            found |= {("server", s.service) for s in ctx.servers}
            return found | {("client", c.service) for c in ctx.clients}
        return self._announced.get(participant.name, set())

    def _wait_ready(self, participant: Participant, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                entities = self._entities_of(participant)
                missing = [r for r in participant.ready if not _has(entities, r)]
                if not missing:
                    return
                if not participant.running:
                    raise ParticipantError(
                        f"participant {participant.name!r} ended before it was ready\n"
                        f"--- its output ---\n{participant.output()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    wanted = ", ".join(f"{k}:{n}" for k, n in missing)
                    seen = ", ".join(f"{k}:{n}" for k, n in sorted(entities)) or "nothing"
                    raise ParticipantError(
                        f"participant {participant.name!r} did not announce {wanted} within "
                        f"{timeout} s (it announced {seen})\n"
                        f"--- its output ---\n{participant.output()}"
                    )
                # Thread participants announce nothing: look again soon.
                self._cond.wait(min(left, 0.05 if participant.thread else 1.0))

    def entities(self) -> set[tuple[str, str]]:
        """(kind, name) of what the started participants announce."""
        found: set[tuple[str, str]] = set()
        for participant in self.participants:
            found |= self._entities_of(participant)
        return found

    def outputs(self) -> list[tuple[str, str]]:
        return [(p.name, p.output()) for p in self.participants if p.output_path or p.error]

    def stop(self) -> None:
        for participant in reversed(self.participants):
            participant.stop()
        if self._watch is not None:
            self._watch.close()
        for log in self._logs:
            log.close()
        self._restore_environment()

"""Ctrl-C as a user presses it: during start-up (reading the options, connecting) it
ends the command with one line and no traceback, and removes the box the command made;
on `topic list --counts`, `service list` and `participant list` it prints what was
gathered, then the summary line."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from collections.abc import Callable

import mailbus
from mailbus.errors import ServiceTimeoutError
from mailbus.options import options_from_mapping
from waiting import eventually

from shell.shell_system import MAILBUS, PASSWORD, WAIT_S, System


def interrupted(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return out, err


def test_ctrl_c_while_the_command_loads(shared_system: System) -> None:
    """Ctrl-C while `mailbus` loads its command modules (a third of a second, and
    more under load): the interpreter's -X importtime says when that has begun."""
    config = ("--config", str(shared_system.config("lab.loading")))
    process = subprocess.Popen(
        [*MAILBUS[:1], "-X", "importtime", *MAILBUS[1:], "topic", "echo", "lab/t", *config],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # bounded: the command ends when its stderr does
        if line.rstrip().endswith("| mailbus.shell.completion"):  # main() has begun
            break
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=WAIT_S)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert len(said) == 1 and process.returncode in (0, 130), (said, process.returncode)
    assert shared_system.own_boxes("lab.loading") == []


def test_ctrl_c_while_connecting_leaves_no_box(shared_system: System) -> None:
    process = shared_system.start("lab.early", "topic", "echo", "lab/t")
    eventually(lambda: shared_system.own_boxes("lab.early"), WAIT_S, "the command's box")
    interrupted(process)
    assert shared_system.own_boxes("lab.early") == []


def drained(system: System, box: str, ctx: mailbus.Context, send: Callable[[], None]) -> None:
    """`send` a letter to the group and wait until the command took it from its box."""
    send()
    assert ctx.sender.flush(WAIT_S)  # type: ignore[attr-defined]
    eventually(lambda: system.letters_in(box) == 0, WAIT_S, f"{box} taking its letters")


def gathered_then_interrupted(
    system: System, box: str, command: tuple[str, ...], first: Callable[[mailbus.Context], None]
) -> list[dict[str, object]]:
    """Run `command` (listening 10 minutes), let `first` send to it, then interrupt
    it once a second letter sent after that was taken from its box: by then the
    command had the first one (one thread takes letters and hands them on in order)."""
    process = system.start(box, *command, "--seconds", "600", "--json")
    [own] = eventually(lambda: system.own_boxes(box), WAIT_S, "the command's box")
    options = options_from_mapping(
        {
            "transport": "postoffice",
            "name": "lab-announcer",
            "announce-period-s": 0.2,
            "postoffice": {"port": system.port, "box": f"{box}x", "password": PASSWORD},
        }
    )
    with mailbus.Context(options) as ctx:
        # The command took a letter: it listens now, and what `first` sends reaches it
        # (the first announcement, sent as the context started, could come before).
        drained(system, own, ctx, lambda: ctx.publisher("lab/ready").publish("{}"))
        drained(system, own, ctx, lambda: first(ctx))
        drained(system, own, ctx, lambda: ctx.publisher("lab/later").publish("{}"))
        out, err = interrupted(process)
    assert err.startswith(" ".join(command[:2]) + ": ")
    return [json.loads(line) for line in out.splitlines()]


def test_topic_list_prints_what_it_counted(shared_system: System) -> None:
    def publish(ctx: mailbus.Context) -> None:
        ctx.publisher("lab/counted").publish('{"n": 1}')

    found = gathered_then_interrupted(
        shared_system, "lab.counts", ("topic", "list", "--counts"), publish
    )
    assert {"topic": "lab/counted", "count": 1} in found


def test_service_list_prints_what_it_saw(shared_system: System) -> None:
    def call(ctx: mailbus.Context) -> None:
        with contextlib.suppress(ServiceTimeoutError):  # nobody serves it: the request is seen
            ctx.client("lab/asked").call("{}", 0.05)

    found = gathered_then_interrupted(shared_system, "lab.services", ("service", "list"), call)
    assert {"service": "lab/asked"} in found


def test_participant_list_prints_who_announced(shared_system: System) -> None:
    def announced(ctx: mailbus.Context) -> None:
        # One more announcement (every 0.2 s), sent once the command listens.
        sent = ctx.sender.sent  # type: ignore[attr-defined]
        eventually(lambda: ctx.sender.sent > sent, WAIT_S, "an announcement")  # type: ignore[attr-defined]

    found = gathered_then_interrupted(
        shared_system, "lab.people", ("participant", "list"), announced
    )
    assert any(p["name"] == "lab-announcer" for p in found), found

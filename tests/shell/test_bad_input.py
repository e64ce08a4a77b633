"""Every `mailbus topic|service|participant` subcommand over every class of bad input,
as a user types it: a one-line error naming what is wrong, exit 2 (usage), nothing on
stdout, never a traceback (docs/shell.md, "Exit codes")."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shell.shell_system import run_many

# Each subcommand with good arguments; NAME marks where a topic or service name goes.
NAME = "\0name"
COMMANDS: dict[str, tuple[str, ...]] = {
    "topic list": (),
    "topic echo": (NAME,),
    "topic hz": (NAME,),
    "topic bw": (NAME,),
    "topic delay": (NAME,),
    "topic pub": (NAME, "{}"),
    "topic info": (NAME,),
    "service list": (),
    "service call": (NAME, "{}"),
    "service echo": (NAME,),
    "service info": (NAME,),
    "participant list": (),
    "participant info": (NAME,),
}
# The option each subcommand refuses when it is not a number above 0.
NUMBERS = {
    "topic pub": ("--rate", "-1", "rate must be above 0"),
    "service call": ("--timeout", "nan", "seconds must be above 0"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A file of each kind that cannot serve as an options file or a body."""
    base = tmp_path_factory.mktemp("bad-input")
    not_utf8 = base / "latin1.toml"
    not_utf8.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    not_toml = base / "broken.toml"
    not_toml.write_text("transport = = postoffice\n")
    # A socket: it exists, and opening it fails (unlike a mode-000 file, also for root).
    unreadable = base / "socket.toml"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(unreadable))
    yield {
        "missing": base / "none.toml",
        "directory": base,
        "unreadable": unreadable,
        "not UTF-8": not_utf8,
        "not TOML": not_toml,
    }
    listener.close()


def bad_inputs(command: str, files: dict[str, Path]) -> list[tuple[str, list[str], str]]:
    """(what, argv, the words the error must have) for each bad input `command` takes."""

    def argv(name: str = "lab/t", *extra: str, demo: bool = True) -> list[str]:
        args = [name if a == NAME else a for a in COMMANDS[command]]
        return [*command.split(), *args, *extra, *(["--demo"] if demo else [])]

    cases = [
        ("options file missing", [*argv(demo=False), "--config", str(files["missing"])], "no such"),
        ("options file a directory", [*argv(demo=False), "--config", str(files["directory"])],
         "Is a directory"),
        ("options file unreadable", [*argv(demo=False), "--config", str(files["unreadable"])],
         "cannot read"),
        ("options file not UTF-8", [*argv(demo=False), "--config", str(files["not UTF-8"])],
         "is not UTF-8 text"),
        ("options file not TOML", [*argv(demo=False), "--config", str(files["not TOML"])],
         "is not valid TOML"),
    ]  # fmt: skip
    if NAME in COMMANDS[command]:
        cases += [
            ("empty name", argv(""), "must not be empty"),
            ("over-long name", argv("lab/" + "t" * 300), "longer than 255 characters"),
            ("control character in name", argv("lab/\x1bt"), "contains control character"),
            ("newline in name", argv("lab/t\nX-Evil: 1"), "contains control character"),
        ]
    if command in ("topic pub", "service call"):
        body_at = len(command.split()) + 1
        for what, wanted in (
            ("missing", "no such file"),
            ("directory", "is a directory"),
            ("unreadable", "cannot be read"),
            ("not UTF-8", "not UTF-8 text"),
        ):
            args = argv("lab/t", "--file", str(files[what]))
            del args[body_at]  # the body comes from --file
            cases.append((f"--file {what}", args, wanted))
    if command == "topic echo":
        cases += [
            ("malformed query", argv("lab/t", "--where", "celsius>>25"), "starts with an operator"),
            ("query word", argv("lab/t", "--where", "hot"), "'hot' is not a condition"),
            ("malformed regex", argv("lab/t", "--where", "/[a/"), "not a regular expression"),
            ("malformed field path", argv("lab/t", "--field", "pose..x"), "field path at '..x'"),
            ("empty field path", argv("lab/t", "--field", ""), "an empty field path"),
            ("count 0", argv("lab/t", "--count", "0"), "count must be above 0"),
        ]
    option, value, wanted = NUMBERS.get(command, ("--seconds", "0", "seconds must be above 0"))
    cases.append((f"{option} {value}", argv("lab/t", option, value), wanted))
    return cases


@pytest.fixture(scope="module")
def answers(files: dict[str, Path]) -> dict[str, list[tuple[str, list[str], str, dict[str, Any]]]]:
    """Every case of every subcommand run, each in a process of its own (fork_runner:
    a hundred interpreters starting would cost minutes)."""
    cases = {command: bad_inputs(command, files) for command in COMMANDS}
    results = iter(run_many([args for command in COMMANDS for _, args, _ in cases[command]]))
    return {command: [(*case, next(results)) for case in cases[command]] for command in COMMANDS}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_input_gets_one_line_and_exit_2(
    command: str, answers: dict[str, list[tuple[str, list[str], str, dict[str, Any]]]]
) -> None:
    failures = []
    for what, args, wanted, result in answers[command]:
        err = str(result["stderr"])
        if (
            result["code"] != 2
            or wanted not in err
            or "Traceback" in err
            or len(err.strip().splitlines()) != 1
            or result["stdout"]
        ):
            failures.append(f"{what}: {args[2:]!r} exit {result['code']}\n{err}{result['stdout']}")
    assert not failures, "\n".join(failures)

"""How a shell tool writes: human lines or one JSON object per line, colour only on a
terminal (and never with NO_COLOR), a one-line JSON summary on stderr with --stats, and
quiet when the reader of a pipe goes away (`| head`)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO


class PipeClosed(Exception):
    """The reader of stdout went away: stop quietly."""


def wants_color(choice: str, stream: TextIO, environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if choice == "always":
        return True
    if choice == "never" or env.get("NO_COLOR"):
        return False
    return stream.isatty()


class Output:
    def __init__(self, *, json_lines: bool, color: str = "auto", stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self.json_lines = json_lines
        self.color = wants_color(color, self.stream)
        self.written = 0

    def emit(self, human: str, record: dict[str, Any]) -> None:
        """One item: `record` as a JSON line with --json, else `human`."""
        text = json.dumps(record, ensure_ascii=False, default=str) if self.json_lines else human
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except BrokenPipeError:
            # Later writes (and the interpreter's own flush at exit) must not fail too.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            raise PipeClosed from None
        self.written += 1

    def bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.color else text

    def dim(self, text: str) -> str:
        return f"\033[2m{text}\033[0m" if self.color else text


def note(text: str) -> None:
    """A line for the person at the terminal (stderr: never mixed into the data)."""
    print(text, file=sys.stderr, flush=True)

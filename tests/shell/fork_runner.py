"""Runs many `mailbus` command lines fast, each in a process of its own: the interpreter
loads mailbus and every command module once, then forks a child per command line that
runs `mailbus.cli.main(argv)` (what the `mailbus` script runs) with its own stdout and
stderr, as the interpreter would, traceback included if one escapes.

    python fork_runner.py < command lines as a JSON list  > results as a JSON list
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import traceback
from typing import IO

from mailbus.cli import build_parser, main

LIMIT_S = 40  # a child still running after this is killed (SIGALRM)


def start(argv: list[str]) -> tuple[int, IO[bytes], IO[bytes]]:
    """Fork a child that runs `mailbus ARGV`; its pid and where its output goes."""
    # Closed by `result`, once the child has written them.
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
    pid = os.fork()
    if pid == 0:  # the child: the command, as `mailbus ARGV` runs it
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        signal.alarm(LIMIT_S)
        code = 1
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return pid, out, err


def result(pid: int, out: IO[bytes], err: IO[bytes]) -> dict[str, object]:
    _, status = os.waitpid(pid, 0)
    texts = []
    for stream in (out, err):
        stream.seek(0)
        texts.append(stream.read().decode("utf-8", "replace"))
        stream.close()
    return {"code": os.waitstatus_to_exitcode(status), "stdout": texts[0], "stderr": texts[1]}


if __name__ == "__main__":
    build_parser()  # loads every command module once, before the forks
    command_lines = json.load(sys.stdin)
    # All at once: a command that does not stop costs LIMIT_S once, not once each.
    children = [start(argv) for argv in command_lines]
    json.dump([result(*child) for child in children], sys.stdout)

"""What a shell tool's exit status means, for scripts."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # A call timed out or was answered with an error; an echo saw nothing in --seconds.
    FAILED = 1
    # Bad arguments, a bad query or path, a bad options file.
    USAGE = 2
    # The system could not be reached (daemon down, wrong port, TLS refused).
    CONNECTION = 3

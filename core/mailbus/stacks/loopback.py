"""What every stack on loopback shares: the address, a free port, a log's last lines."""

from __future__ import annotations

import random
import socket
from pathlib import Path

HOST = "127.0.0.1"

# Below Linux's ephemeral range (32768-60999): a port the kernel handed out for
# `bind(0)` goes back to the pool it gives every outgoing connection, so a busy
# machine can take it as a client's local port before the server binds it (CI
# lost a relay that way). Ports from this range are never handed out implicitly.
PORT_RANGE = range(20_000, 32_000)
_choose = random.SystemRandom()
# A stack asks for its ports one by one before any server binds them: a port handed out
# is never handed out again by this process (two draws alike made Dovecot refuse its
# configuration, "duplicate listener", about once in a thousand stacks).
_handed_out: set[int] = set()


def free_port(host: str = HOST) -> int:
    """A port on `host` that nothing is bound to now, outside the ephemeral range, and
    that this process has not handed out before."""
    for _ in range(200):
        port = _choose.choice(PORT_RANGE)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    raise OSError(f"no free port on {host} in {PORT_RANGE.start}-{PORT_RANGE.stop - 1}")


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` of a server's log, for the error that says why it did not start."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"

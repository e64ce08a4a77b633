"""`mailbus topic pub` never says "published" for what cannot arrive: a message over
the transport's limit is refused before it is sent (exit 1, the limit named), and one
the daemon refuses after all makes the command fail, not succeed silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.postoffice.server import ServerThread
from mailbus.trace import Tracer
from postoffice.conftest import daemon_config

from shell.shell_system import System


@pytest.mark.slow
def test_a_body_over_the_daemons_letter_limit_is_refused_before_sending(
    shared_system: System, tmp_path: Path
) -> None:
    big = tmp_path / "big.json"
    big.write_text('"' + "x" * (17 * 1024 * 1024) + '"')  # the daemon takes 16 MiB
    done = shared_system.run("lab.big", "topic", "pub", "lab/big", "--file", str(big))
    assert done.returncode == 1, done.stderr
    assert "published" not in done.stdout
    assert "not sent" in done.stderr and "limit of 16,777,216 bytes" in done.stderr
    assert "postoffice.max-letter-bytes" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_limit_the_options_name_is_the_one_refused(shared_system: System) -> None:
    config = shared_system.config("lab.small")
    config.write_text(config.read_text() + "max-letter-bytes = 2000\n")
    done = shared_system.run(config, "topic", "pub", "lab/t", "y" * 3000)
    assert done.returncode == 1 and "published" not in done.stdout
    assert "limit of 2,000 bytes" in done.stderr, done.stderr
    small = shared_system.run(config, "topic", "pub", "lab/t", "y" * 100)
    assert small.returncode == 0 and small.stdout.startswith("published lab/t <"), small.stderr


def test_a_letter_the_daemon_refuses_fails_the_command(tmp_path: Path) -> None:
    """The daemon was started with a lower limit than the options know of: the letter
    goes, the daemon refuses it, and the command says so with exit 1."""
    daemon = ServerThread(daemon_config(tmp_path, max_letter_bytes=3000), Tracer()).start()
    try:
        system = System.__new__(System)
        system.tmp, system.daemon, system.port = tmp_path, daemon, daemon.port
        done = system.run("lab.tool", "topic", "pub", "lab/t", "z" * 5000)
    finally:
        daemon.stop()
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "1 of 1 not delivered" in done.stderr and "Traceback" not in done.stderr

"""`workbench(config)`: the whole workbench in a notebook cell, served as `mailbus serve`
serves it (textual-serve, one workbench process per page) by a `mailbus serve` process
this kernel starts, shown in an IFrame.

The engine never imports the workbench: the server is a process started by name
(`python -m mailbus_workbench serve`), stopped with `stop()` or at the kernel's exit.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from html import escape
from pathlib import Path

from mailbus.errors import ConfigError
from mailbus.stacks.loopback import free_port

START_TIMEOUT_S = 30.0
POLL_S = 0.1


def _answers(host: str, port: int) -> bool:
    connection = http.client.HTTPConnection(host, port, timeout=1)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


class ServedWorkbench:
    """A `mailbus serve` process and the page it serves; shown in a cell as an IFrame."""

    def __init__(
        self,
        config: str | os.PathLike[str] | None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        height: int = 720,
    ) -> None:
        self.config = None if config is None else Path(config).absolute()
        if self.config is not None:
            _check_reachable(self.config)
        self.host = host
        self.port = port or free_port(host)
        self.height = height
        self.url = f"http://{host}:{self.port}"
        command = [sys.executable, "-m", "mailbus_workbench"]
        if self.config is not None:
            command += ["--config", str(self.config)]
        command += ["serve", "--host", host, "--port", str(self.port)]
        # Open while the server runs (what it printed explains a failed start); closed
        # by stop().
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        # A session of its own: stop() ends the server and the workbench it runs per page.
        self.process = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(host, self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                said = self.output()
                self.stop()
                raise RuntimeError(f"mailbus serve did not start on {self.url}: {said}")
            time.sleep(POLL_S)  # a poll of another process's port, bounded by the deadline

    def output(self) -> str:
        """What the server process printed (the last 2,000 characters)."""
        if self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-2000:]

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """Stop the server and the workbenches it started. Safe to call more than once."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()
        atexit.unregister(self.stop)

    def _repr_html_(self) -> str:
        if not self.running:
            return f"<div class='mailbus-served'>The workbench at {escape(self.url)} stopped.</div>"
        return (
            f"<iframe class='mailbus-served' src='{escape(self.url)}' width='100%' "
            f"height='{int(self.height)}' style='border:1px solid #ccc'></iframe>"
        )

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<mailbus workbench served at {self.url}, {state}>"


def _check_reachable(config: Path) -> None:
    """An in-process system lives in one process: a served workbench (another process)
    would watch a system of its own, not this one."""
    from mailbus.options import load_options

    if not config.is_file():
        raise ConfigError(str(config), "no such options file")
    options = load_options(str(config))
    if options.transport == "inprocess":
        raise ConfigError(
            str(config),
            "an in-process system is reachable from its own process only: watch it with "
            "mailbus.notebook.Monitor(ctx); serve a PostOffice or email system",
        )


def workbench(
    config: str | os.PathLike[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    height: int = 720,
) -> ServedWorkbench:
    """The workbench in this cell, attached to `config`'s system (a PostOffice or email
    system other processes reach; without `config`, the served demo of `mailbus serve`)."""
    return ServedWorkbench(config, host=host, port=port, height=height)

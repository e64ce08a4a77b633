"""Fixtures of the workbench tests: no test reads the user's own keymap or templates."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import mailbus
import pytest
from mailbus_workbench.engine import EngineHost


@pytest.fixture(autouse=True)
def _own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "workbench-config"
    monkeypatch.setenv("MAILBUS_WORKBENCH_DIR", str(directory))
    return directory


@pytest.fixture
def engine() -> Iterator[EngineHost]:
    """A real in-process engine without the demo, with an `echo` service that answers
    every request with its body reversed (and never answers `silent`)."""
    host = EngineHost(demo=False)
    host.start()
    stop = threading.Event()
    server = host.context.server("echo")

    def serve() -> None:
        while not stop.is_set():
            request = mailbus.wait_for_request(server, 0.05)
            if request is not None:
                server.send_response(request, request.body[::-1])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield host
    finally:
        stop.set()
        thread.join(2)
        host.stop()

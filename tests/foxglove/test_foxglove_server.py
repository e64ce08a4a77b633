"""The I/O loop in this process: status messages for what the engine reports, refused
handshakes, and the command's one-line errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mailbus.context import Context
from mailbus.foxglove import protocol as P
from mailbus.foxglove.served import exposure_warning
from mailbus.foxglove.server import FoxgloveError, FoxgloveServer
from mailbus.options import Options
from mailbus.trace import Kind
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect


@pytest.fixture
def served() -> Iterator[FoxgloveServer]:
    with Context(Options()) as ctx, FoxgloveServer(ctx, port=0) as server:
        yield server


def next_status(ws: ClientConnection) -> P.Status:
    while True:
        message = P.decode_server(ws.recv(timeout=10))
        if isinstance(message, P.Status):
            return message


def test_skipped_emails_and_transport_errors_become_statuses(served: FoxgloveServer) -> None:
    with connect(served.url, subprotocols=[P.SUBPROTOCOLS[1]]) as ws:  # type: ignore[list-item]
        assert isinstance(P.decode_server(ws.recv(timeout=10)), P.ServerInfo)
        tracer = served.context.tracer
        for _ in range(3):
            tracer.event(Kind.SKIPPED, detail="malformed", extra={"reason": "malformed"})
        status = next_status(ws)
        assert (status.level, status.message) == (
            P.StatusLevel.WARNING,
            "skipped: 3 emails (malformed)",
        )
        assert status.id == "mailbus-skipped-malformed"
        tracer.event(Kind.SKIPPED, detail="bad_signature", extra={"reason": "bad_signature"})
        status = next_status(ws)
        assert status.level == P.StatusLevel.ERROR
        assert status.message == "refused signature: 1 email (bad_signature)"
        tracer.event(Kind.ERROR, detail="receive failed: connection refused")
        status = next_status(ws)
        assert status == P.Status(
            P.StatusLevel.ERROR,
            "transport error: receive failed: connection refused",
            "mailbus-transport",
        )


def test_a_client_without_a_foxglove_subprotocol_is_refused(served: FoxgloveServer) -> None:
    with pytest.raises(InvalidStatus, match="400"):
        connect(served.url, subprotocols=["chat"], open_timeout=10)  # type: ignore[list-item]


def test_a_port_in_use_is_one_line_not_a_traceback() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with (
            Context() as ctx,
            pytest.raises(FoxgloveError, match=f"cannot serve on ws://127.0.0.1:{port}"),
        ):
            FoxgloveServer(ctx, port=port).start()
        done = subprocess.run(
            [sys.executable, "-m", "mailbus", "foxglove", "--demo", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"mailbus: cannot serve on ws://127.0.0.1:{port}")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (["--session", "/nonexistent/session"], "no session directory"),
        (["--demo", "--rate", "2"], "--rate, --loop and --paused go with --session"),
        (["--speed", "3"], "--speed goes with --demo"),
        (["--demo", "--config", "lab.toml"], "give one of --config, --demo and --session"),
    ],
)
def test_bad_options_are_one_line(args: list[str], told: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mailbus", "foxglove", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and told in done.stderr and "Traceback" not in done.stderr


def test_only_another_interface_than_loopback_is_warned_about() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.1.1"):
        assert exposure_warning(host, 8765, True, True) is None
    warning = exposure_warning("0.0.0.0", 8765, allow_calls=True, allow_publish=False)
    assert warning is not None
    assert "no authentication" in warning and "calls services" in warning
    assert "SSH tunnel" in warning


def test_the_notebook_serves_the_demo_and_a_context_of_its_own() -> None:
    from mailbus.notebook import foxglove

    served = foxglove(demo=True, port=0)
    try:
        assert "Open connection" in served._repr_html_()
        with connect(served.url, subprotocols=[P.SUBPROTOCOLS[0]]) as ws:  # type: ignore[list-item]
            info = P.decode_server(ws.recv(timeout=10))
            assert isinstance(info, P.ServerInfo) and info.name == "mailbus demo"
    finally:
        served.stop()
    assert served.context.is_shut_down
    with Context(Options()) as ctx:
        server = foxglove(context=ctx, port=0, allow_publish=True)
        try:
            with connect(server.url, subprotocols=[P.SUBPROTOCOLS[1]]) as ws:  # type: ignore[list-item]
                info = P.decode_server(ws.recv(timeout=10))
                assert isinstance(info, P.ServerInfo)
                assert "clientPublish" in info.capabilities
        finally:
            server.stop()
        assert ctx.is_initialized  # the context stays the caller's


def test_schemas_declared_in_the_options_file(tmp_path: Path) -> None:
    from mailbus.foxglove.served import declared_schemas
    from mailbus.options import load_options

    (tmp_path / "pose.json").write_text('{"type": "object", "required": ["x"]}')
    config = tmp_path / "lab.toml"
    config.write_text(
        '[foxglove.schemas]\n"robot/pose" = "' + str(tmp_path / "pose.json") + '"\n'
        '"lab/t" = { type = "object", properties = { c = { type = "number" } } }\n'
    )
    schemas = declared_schemas(load_options(str(config)))
    assert json.loads(schemas["robot/pose"]) == {"type": "object", "required": ["x"]}
    assert json.loads(schemas["lab/t"])["properties"] == {"c": {"type": "number"}}

    config.write_text('[foxglove.schemas]\n"robot/pose" = "missing.json"\n')
    done = subprocess.run(
        [sys.executable, "-m", "mailbus", "--config", str(config), "foxglove", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "foxglove.schemas.robot/pose" in done.stderr and "missing.json" in done.stderr


def test_the_engines_hand_over_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailbus.foxglove import server as server_module
    from mailbus.trace import TraceEvent

    monkeypatch.setattr(server_module, "INBOX_LIMIT", 3)
    with Context(Options()) as ctx:
        server = FoxgloveServer(ctx, port=0)  # not started: nothing takes the inbox
        for n in range(5):
            event = TraceEvent(Kind.RECEIVED, 0, name=f"lab/t{n}", body="{}", detail="message")
            server._on_event(event)
        server._drain()
        assert server.stats["dropped"] == 2
        assert server.bridge.known == {"lab/t0", "lab/t1", "lab/t2"}

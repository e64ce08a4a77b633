"""`mailbus stem send` and `mailbus stem serve`, run over a real in-process context
that a hub in this process serves (the command's context factory is swapped for one
that lends that context)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from argparse import Namespace
from collections.abc import Callable, Iterator
from typing import Any

import mailbus.context
import mailbus.registry
import pytest
from mailbus import Context
from mailbus.cli import main
from mailbus.stem import Cell, Hub, StemMessage
from mailbus.stem import cli as stem_cli
from mailbus.stem.cli import EchoCell
from waiting import eventually

MakeHub = Callable[..., Hub]


class Borrowed:
    """Stands for a new context in the command; the test owns the real one, so
    entering and leaving it neither initialises nor shuts it down."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self.context, name)

    def __enter__(self) -> Context:
        return self.context

    def __exit__(self, *exc: object) -> None:
        pass


class Failing(Cell):
    def explode_cmd(self, message: StemMessage) -> Any:
        raise ValueError("no such thing")


@pytest.fixture
def served(ctx: Context, hubs: MakeHub, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    monkeypatch.setattr(stem_cli, "make_context", lambda options: Borrowed(ctx))
    monkeypatch.delenv("MAILBUS_CONFIG_FILE", raising=False)
    hub = hubs("B")
    hub.register_cell(EchoCell(), "echo")
    hub.register_cell(Failing(), "failing")
    hub.listen(ctx)
    with hub:
        yield hub


def test_send_prints_the_response(served: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stem", "send", "B:echo", "echo", '{"x": [1, "é"]}']) == 0
    assert json.loads(capsys.readouterr().out) == {"x": [1, "é"]}
    assert main(["stem", "send", "--via", "B", "--hub", "me", "echo", "echo"]) == 0
    assert capsys.readouterr().out.strip() == '""'  # echo answers "" to no data


def test_send_reports_an_error_reply(served: Hub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stem", "send", "B:failing", "explode"]) == 1
    err = capsys.readouterr().err
    assert "error from B:failing" in err and "ValueError: no such thing" in err


def test_send_times_out_when_nobody_answers(
    served: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stem", "send", "--timeout", "0.2", "Z:echo", "echo"]) == 1
    assert "no reply from Z:echo" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["bad address", "echo"], "is not a Stem address"),
        (["B:echo", "echo", "{not json"], "Expecting property name"),
        (["echo", "echo"], "names no hub"),
        (["B:echo", "echo", "--hub", "bad name"], "may hold only"),
    ],
)
def test_send_refuses_bad_arguments(
    served: Hub, capsys: pytest.CaptureFixture[str], argv: list[str], problem: str
) -> None:
    assert main(["stem", "send", *argv]) == 2
    assert problem in capsys.readouterr().err


def test_send_to_its_own_hub_name_is_refused(
    served: Hub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stem", "send", "--hub", "B", "B:echo", "echo", "1"]) == 1
    assert "to itself" in capsys.readouterr().err


def test_unavailable_transport_is_a_clear_error(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAILBUS_CONFIG_FILE", raising=False)
    monkeypatch.setitem(
        mailbus.registry.TRANSPORTS,
        "postoffice",
        mailbus.registry.TransportEntry("mailbus.no_such_module:create_transport"),
    )
    config = tmp_path / "po.toml"
    config.write_text('transport = "postoffice"\n')
    assert main(["--config", str(config), "stem", "send", "B:echo", "echo", "1"]) == 1
    assert "not available" in capsys.readouterr().err
    assert main(["--config", str(config), "stem", "serve", "X", "--seconds", "1"]) == 1
    assert "not available" in capsys.readouterr().err


def test_stem_without_a_command_shows_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stem"]) == 2
    assert "send" in capsys.readouterr().out


def test_the_mailbus_command_knows_stem() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mailbus", "stem", "send", "no:good:add:ress", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "is not a Stem address" in out.stderr


def test_serve_runs_a_hub_with_echo_and_status(
    ctx: Context, hubs: MakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stem_cli, "make_context", lambda options: Borrowed(ctx))
    monkeypatch.delenv("MAILBUS_CONFIG_FILE", raising=False)
    stop = threading.Event()
    codes: list[int] = []
    args = Namespace(name="srv", seconds=30.0, config=None)
    thread = threading.Thread(target=lambda: codes.append(stem_cli._serve(args, stop)))
    thread.start()
    try:
        eventually(lambda: any(s.topic == "stem/srv" for s in ctx.subscriptions), 10, "serve")
        client = hubs("cli")
        client.connect(ctx, "srv")
        assert client.call("srv:echo", "echo", [1], timeout=5.0).data == [1]
        state = client.call("srv:status", "status", timeout=5.0).data
        assert state["hub"] == "srv" and state["cells"] == ["echo", "status"]
        assert state["counters"]["delivered"] >= 1 and "cli" in state["portals"]
    finally:
        stop.set()
        thread.join(10)
    assert codes == [0]

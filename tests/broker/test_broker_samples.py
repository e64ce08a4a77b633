"""The sample modules' arguments are checked like the rest of a gateway file."""

from __future__ import annotations

from typing import Any

import pytest
from mailbus.broker import Broker, GatewayConfigError
from mailbus.broker.samples import Printer, Ticker


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ([], "args must be an object"),
        ({"period_s": -1}, "'period_s'"),
        ({"period_s": "1"}, "'period_s'"),
        ({"count": True}, "'count'"),
    ],
)
def test_ticker_arguments(args: Any, problem: str) -> None:
    with Broker.create() as broker, pytest.raises(GatewayConfigError, match=problem):
        Ticker(broker, args)


def test_printer_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from mailbus.broker import BrokerMessage

    with Broker.create() as broker:
        with pytest.raises(GatewayConfigError, match="args must be an object"):
            Printer(broker, "x")
        printer = Printer(broker, {"prefix": "# "})
        printer.receive(BrokerMessage(b"\xffok", {"b": "2", "a": "1"}))
    assert capsys.readouterr().out == '# \\xffok {"a": "1", "b": "2"}\n'

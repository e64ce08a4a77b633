"""Small modules for trying a gateway out (and for the command line's tests).

`Ticker` publishes `{"content": "tick", "period_s": 1.0, "count": null}` on its own
thread from start() on; `Printer` writes each message it receives as one line on
standard output; `Counter` counts what it receives and by which properties.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING, Any

from mailbus.broker.errors import BrokerError, GatewayConfigError
from mailbus.broker.message import BrokerMessage

if TYPE_CHECKING:
    from mailbus.broker.broker import Broker


def _number(args: dict[str, Any], key: str, default: float | None, what: str) -> float | None:
    value = args.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise GatewayConfigError(what, f"{key!r} must be a number >= 0")
    return float(value)


class Ticker:
    def __init__(self, broker: Broker, args: Any) -> None:
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise GatewayConfigError("ticker", "args must be an object")
        self._broker = broker
        self.content = str(args.get("content", "tick"))
        self.period = _number(args, "period_s", 1.0, "ticker") or 0.0
        count = _number(args, "count", None, "ticker")
        self.count = None if count is None else int(count)
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ticker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # The period is the ticker's pace, waited on the stop event so destroy is prompt.
        while self.count is None or self.sent < self.count:
            message = BrokerMessage(self.content, {"seq": str(self.sent)})
            try:
                self._broker.publish(self, message)
            except BrokerError:
                return  # removed or destroyed meanwhile
            self.sent += 1
            if self._stop.wait(self.period):
                return

    def receive(self, message: BrokerMessage) -> None:
        pass  # a pure source: anything linked into it is accepted and ignored

    def destroy(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)


class Printer:
    def __init__(self, broker: Broker, args: Any) -> None:
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise GatewayConfigError("printer", "args must be an object")
        self.prefix = str(args.get("prefix", ""))
        self.printed = 0

    def receive(self, message: BrokerMessage) -> None:
        content = message.content.decode("utf-8", errors="backslashreplace")
        properties = json.dumps(dict(message.properties), sort_keys=True)
        print(f"{self.prefix}{content} {properties}", file=sys.stdout, flush=True)
        self.printed += 1

    def destroy(self) -> None:
        pass


class Counter:
    def __init__(self, broker: Broker, args: Any) -> None:
        self.count = 0
        self.contents: list[bytes] = []

    def receive(self, message: BrokerMessage) -> None:
        self.count += 1
        self.contents.append(message.content)

    def destroy(self) -> None:
        pass

"""A hub in a process of its own, for the cross-process tests.

    python remote_hub.py NAME --net ROOT [--net ROOT2] [--connect ROOT:HUB] [--route HUB=VIA]

It listens on every --net (a maildir_transport root), connects client portals, adds
routes, registers cells `echo`, `status` (mailbus.stem.cli) and `control` (its `stop`
command ends the process), prints READY and runs until stopped (at most 120 s).
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from mailbus import Context, Options
from mailbus.stem import Cell, Hub, Message
from mailbus.stem.cli import EchoCell, StatusCell
from maildir_transport import maildir_transport


class Control(Cell):
    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def stop_cmd(self, message: Message) -> Any:
        self.stop.set()
        return "stopping"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--net", action="append", default=[])
    parser.add_argument("--connect", action="append", default=[])
    parser.add_argument("--route", action="append", default=[])
    args = parser.parse_args()
    stop = threading.Event()
    hub = Hub(args.name)
    contexts: dict[str, Context] = {}
    try:
        for root in args.net:
            options = Options(from_address=f"{args.name.lower()}@localhost", polling_period_ms=5)
            context = Context(options, transport=maildir_transport(Path(root), args.name))
            contexts[root] = context
            hub.listen(context)
        for spec in args.connect:
            root, _, remote = spec.rpartition(":")
            hub.connect(contexts[root], remote)
        for spec in args.route:
            target, _, via = spec.partition("=")
            hub.add_route(target, via)
        # Only now: the inboxes exist before the backlog a restart finds is read.
        for context in contexts.values():
            context.init()
        hub.register_cell(EchoCell(), "echo")
        hub.register_cell(StatusCell(), "status")
        hub.register_cell(Control(stop), "control")
        with hub:
            print("READY", flush=True)
            stop.wait(120)
    finally:
        hub.close()
        for context in contexts.values():
            context.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

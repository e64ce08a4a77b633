"""A hub in a process of its own, for the cross-process tests.

    python remote_hub.py NAME --net NET [--net NET2] [--connect NET:HUB] [--route HUB=VIA]

A NET is `dir:ROOT` (maildir_transport under ROOT), `po:PORT:BOX:PASSWORD` (the
PostOffice daemon on 127.0.0.1:PORT, this hub's mailbox BOX, whose group is its parent)
or `toml:FILE` (an options file, e.g. the email transport).
The hub listens on every --net, connects client portals, adds routes, registers cells
`echo`, `status` (mailbus.stem.cli) and `control` (its `stop` command ends the process),
prints READY and runs until stopped (at most 120 s).
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from mailbus import Context
from mailbus.stem import Cell, Hub, StemMessage
from mailbus.stem.cli import EchoCell, StatusCell
from stem_helpers import make_context


class Control(Cell):
    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def stop_cmd(self, message: StemMessage) -> Any:
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
        for net in args.net:
            context = make_context(net, args.name)
            contexts[net] = context
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

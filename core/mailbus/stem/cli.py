"""`mailbus stem ...`: send a command to a cell and print its response; run a small hub.

    mailbus stem serve demo                       # a hub "demo" with cells echo, status
    mailbus stem send demo:echo echo '{"x": 1}'   # prints {"x": 1}

Both use the transport of the options file (`--config`); with the default in-process
transport only cells of this very process are reachable, so give a cross-process
transport (email, postoffice) to talk to another process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from typing import Any

from mailbus.context import Context
from mailbus.errors import MailbusError
from mailbus.options import Options, load_options
from mailbus.stem.address import Address
from mailbus.stem.errors import AddressError, CallTimeoutError
from mailbus.stem.hub import Cell, Hub
from mailbus.stem.message import StemMessage

# Tests replace this to run the commands over a transport of their own.
make_context = Context


class EchoCell(Cell):
    def echo_cmd(self, message: StemMessage) -> Any:
        # None would mean "no response" (the design's rule): answer "" for no data.
        return "" if message.data is None else message.data


class StatusCell(Cell):
    def status_cmd(self, message: StemMessage) -> Any:
        hub = self.hub
        assert hub is not None
        return {
            "hub": hub.name,
            "cells": [":".join(filter(None, key)) for key in hub.cells.names()],
            "portals": {name: repr(portal) for name, portal in hub.portals.names.items()},
            "counters": dict(hub.counters),
        }


def _options(args: argparse.Namespace) -> Options:
    return load_options(getattr(args, "config", None))


def _send(args: argparse.Namespace) -> int:
    try:
        to = Address.parse(args.to)
        data = None if args.data is None else json.loads(args.data)
        via = to.hub or args.via
        if not via:
            raise AddressError(f"{args.to!r} names no hub: write hub:cell or give --via HUB")
        options = _options(args)
        hub = Hub(args.hub or f"cli_{os.getpid()}")
    except (AddressError, MailbusError, ValueError) as exc:
        print(f"mailbus stem send: {exc}", file=sys.stderr)
        return 2
    try:
        context = make_context(options)
        hub.connect(context, via)  # before init: the inbox is there when polling starts
        with context:
            try:
                reply = hub.call(to, args.cmd, data, timeout=args.timeout)
            finally:
                hub.close()
    except CallTimeoutError as exc:
        print(
            f"mailbus stem send: {exc} (is the hub up and listening? a command method "
            "that returns None sends no response)",
            file=sys.stderr,
        )
        return 1
    except (MailbusError, ValueError) as exc:  # transport unavailable, hub names clash
        print(f"mailbus stem send: {exc}", file=sys.stderr)
        return 1
    if reply.type == "error":
        print(f"mailbus stem send: error from {reply.from_}: {reply.data}", file=sys.stderr)
        return 1
    print(json.dumps(reply.data, ensure_ascii=False))
    return 0


def _serve(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    try:
        options = _options(args)
        hub = Hub(args.name)
    except (AddressError, MailbusError, ValueError) as exc:
        print(f"mailbus stem serve: {exc}", file=sys.stderr)
        return 2
    stop = stop or threading.Event()
    context = make_context(options)
    hub.register_cell(EchoCell(), "echo")
    hub.register_cell(StatusCell(), "status")
    hub.listen(context)  # before init: a backlog in the mailbox finds the inbox
    try:
        with context, hub:
            print(f"hub {hub.name} listening on topic stem/{hub.name}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait(args.seconds)
    except MailbusError as exc:  # the transport could not start
        print(f"mailbus stem serve: {exc}", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("stem", help="Stem cells, hubs and portals")
    commands = parser.add_subparsers(dest="stem_command", metavar="COMMAND")

    def usage(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(handler=usage)

    send = commands.add_parser(
        "send", help="send a command to a cell through a hub and print the response"
    )
    send.add_argument("to", metavar="TO", help="address hub:cell[:target]")
    send.add_argument("cmd", metavar="CMD", help="the command (calls <CMD>_cmd on the cell)")
    send.add_argument("data", metavar="DATA", nargs="?", help="JSON data (default null)")
    send.add_argument("--hub", help="name of this command's own hub (default cli_<pid>)")
    send.add_argument("--via", metavar="HUB", help="hub to go through when TO names none")
    send.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    send.set_defaults(handler=_send)

    serve = commands.add_parser("serve", help="run a hub with cells echo and status")
    serve.add_argument("name", metavar="NAME", help="the hub's name")
    serve.add_argument("--seconds", type=float, default=None, help="stop after N seconds")
    serve.set_defaults(handler=_serve)

"""`mailbus queue`: list, show, retry and purge the outbox, with `--json` for scripts.

The outbox directory comes from `--dir`, else $MAILBUS_OUTBOX_DIR, else `dir` in the
`[outbox]` table of the options file. `list` and `show` read without the lock; `retry`
and `purge` change the outbox: under its lock when it is free, else through the running
sender that holds it (mailbus.outbox.admin.run), waiting up to `--timeout` seconds for
its answer.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from mailbus.errors import ConfigError, MailbusError
from mailbus.options import load_options
from mailbus.outbox.admin import DEFAULT_TIMEOUT_S, run
from mailbus.outbox.control import ControlRequest
from mailbus.outbox.listing import list_outbox, show_entry


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir", help="outbox directory (default: $MAILBUS_OUTBOX_DIR, [outbox] dir)"
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    changing = argparse.ArgumentParser(add_help=False)
    changing.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"wait this long for a running sender to answer (default {DEFAULT_TIMEOUT_S:g})",
    )
    queue = subparsers.add_parser("queue", help="inspect and manage the durable outbox")
    actions = queue.add_subparsers(dest="queue_command", metavar="ACTION")
    actions.add_parser("list", parents=[common], help="every entry with its state")
    show = actions.add_parser("show", parents=[common], help="one entry and its email")
    show.add_argument("id")
    retry = actions.add_parser("retry", parents=[common, changing], help="make entries due now")
    retry.add_argument("ids", nargs="*", metavar="ID")
    retry.add_argument("--all", action="store_true", help="every queued and dead entry")
    purge = actions.add_parser("purge", parents=[common, changing], help="remove entries unsent")
    purge.add_argument("ids", nargs="*", metavar="ID")
    purge.add_argument("--dead", action="store_true", help="every dead entry")
    purge.add_argument("--corrupt", action="store_true", help="every set-aside entry")
    purge.add_argument("--all", action="store_true", help="every entry")
    queue.set_defaults(handler=_main, queue_parser=queue)
    for parser, handler in ((show, _show), (retry, _retry), (purge, _purge)):
        parser.set_defaults(handler=handler)
    actions.choices["list"].set_defaults(handler=_list)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _directory(args: argparse.Namespace) -> str:
    if args.dir:
        return str(args.dir)
    env = os.environ.get("MAILBUS_OUTBOX_DIR")
    if env:
        return env
    section = load_options(getattr(args, "config", None)).sections.get("outbox", {})
    value = section.get("dir")
    if isinstance(value, str) and value:
        return os.path.expanduser(value)
    raise ConfigError("outbox.dir", "no outbox directory: use --dir or MAILBUS_OUTBOX_DIR")


def _fail(args: argparse.Namespace, message: str) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": message}))
    else:
        print(f"mailbus queue: {message}", file=sys.stderr)
    return 1


def _guarded(args: argparse.Namespace, body: Any) -> int:
    try:
        return int(body(_directory(args)))
    except (MailbusError, OSError) as exc:
        return _fail(args, str(exc))


def _main(args: argparse.Namespace) -> int:
    args.queue_parser.print_help()
    return 2


def _when(ns: int, now_ns: int) -> str:
    if ns <= now_ns:
        return "now"
    return f"in {(ns - now_ns) / 1e9:.0f}s"


def _list(args: argparse.Namespace) -> int:
    def body(directory: str) -> int:
        items = list_outbox(directory)
        if args.json:
            print(json.dumps([item.to_dict() for item in items]))
            return 0
        now = time.time_ns()
        header = ("ID", "STATE", "TRIES", "NEXT", "AGE", "SIZE")
        print("{:36}  {:8}  {:>5}  {:>8}  {:>7}  {:>7}  DESTINATION".format(*header))
        for item in items:
            print(
                f"{item.id:36}  {item.state:8}  {item.attempts:5d}  "
                f"{_when(item.next_attempt_ns, now) if item.state == 'queued' else '-':>8}  "
                f"{item.age_s:6.0f}s  {item.size:7d}  {item.destination or item.last_error}"
            )
        print(f"{len(items)} entries")
        return 0

    return _guarded(args, body)


def _show(args: argparse.Namespace) -> int:
    def body(directory: str) -> int:
        item, contents = show_entry(directory, args.id)
        if args.json:
            print(json.dumps({**item.to_dict(), "contents": contents.decode("utf-8", "replace")}))
            return 0
        for key, value in item.to_dict().items():
            print(f"{key}: {value}")
        print()
        sys.stdout.write(contents.decode("utf-8", "replace").replace("\r\n", "\n"))
        return 0

    return _guarded(args, body)


def _report(args: argparse.Namespace, verb: str, done: list[str]) -> None:
    if args.json:
        print(json.dumps({verb: done}))
    else:
        print(f"{verb} {len(done)} entries")


def _retry(args: argparse.Namespace) -> int:
    if not args.ids and not args.all:
        return _fail(args, "name entry ids or use --all")

    def body(directory: str) -> int:
        request = ControlRequest("retry", tuple(args.ids), frozenset({"all"} if args.all else ()))
        _report(args, "retried", run(directory, request, args.timeout))
        return 0

    return _guarded(args, body)


def _purge(args: argparse.Namespace) -> int:
    if not (args.ids or args.dead or args.all or args.corrupt):
        return _fail(args, "name entry ids or use --dead, --corrupt or --all")

    def body(directory: str) -> int:
        select = {name for name in ("all", "dead", "corrupt") if getattr(args, name)}
        request = ControlRequest("purge", tuple(args.ids), frozenset(select))
        _report(args, "purged", run(directory, request, args.timeout))
        return 0

    return _guarded(args, body)

"""What every shell tool does around its work: open the system the options name (or run
the demo inside the command with --demo), watch what arrives, and turn each way of
ending (done, Ctrl-C, a closed pipe, a bad option, an unreachable server) into its exit
code and one line saying what to do."""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from mailbus.context import Context
from mailbus.errors import ConfigError, MailbusError
from mailbus.field_path import FieldPathError
from mailbus.query import QueryError
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, PipeClosed, note
from mailbus.trace import Kind, TraceEvent

INTERNAL_PREFIX = "_mailbus/"


class UsageError(ValueError):
    """Arguments that do not make sense together; the message says which."""


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE.toml", default=argparse.SUPPRESS, help="the system's options"
    )
    parser.add_argument(
        "--demo", action="store_true", help="run the built-in demo system inside this command"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="(NO_COLOR wins)"
    )
    parser.add_argument(
        "--stats", action="store_true", help="a one-line JSON summary on stderr at the end"
    )


_TRAFFIC: weakref.WeakKeyDictionary[Context, Traffic] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def open_system(args: argparse.Namespace, *, listen: bool = False) -> Iterator[Context]:
    """The context the command works through; with --demo, the demo runs in it. With
    `listen`, its traffic is heard from before it starts (`traffic_of`)."""
    from mailbus.options import load_options, options_from_mapping

    if args.demo:
        options = options_from_mapping({"announce-period-s": 1.0})
    else:
        options = load_options(getattr(args, "config", None))
    ctx = Context(options)
    if listen:
        _TRAFFIC[ctx] = Traffic(ctx)
    with ctx:
        if not args.demo:
            yield ctx
            return
        from mailbus.demo import DemoSystem

        demo = DemoSystem(ctx)
        demo.start()
        try:
            yield ctx
        finally:
            demo.stop()


def traffic_of(ctx: Context) -> Traffic:
    """Every email `ctx` receives. For a context from `open_system`, from its start: a
    mail context with `start-uid` reads its backlog at the first poll, which can come
    before the command's first line after `open_system` (it did, under load)."""
    traffic = _TRAFFIC.get(ctx)
    if traffic is None:
        traffic = _TRAFFIC[ctx] = Traffic(ctx)
    return traffic


class Traffic:
    """Every email the context receives, whoever it is for, as trace events."""

    def __init__(self, ctx: Context) -> None:
        self._queue: queue.SimpleQueue[TraceEvent] = queue.SimpleQueue()
        ctx.tracer.add_listener(self._take)

    def _take(self, event: TraceEvent) -> None:
        if event.kind == Kind.RECEIVED:
            self._queue.put(event)

    def next(self, deadline: float | None) -> TraceEvent | None:
        """The next email, or None once `deadline` (monotonic) has passed."""
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return None
            try:
                # Bounded so that Ctrl-C is seen promptly on every platform.
                return self._queue.get(timeout=0.5 if wait is None else min(wait, 0.5))
            except queue.Empty:
                continue


def deadline_after(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds


Summary = Callable[[], dict[str, Any]]


def run(args: argparse.Namespace, work: Callable[[Output, dict[str, Any]], ExitCode]) -> int:
    """Run `work(output, summary)`; `summary` is what it counted, printed on Ctrl-C and
    with --stats."""
    output = Output(json_lines=args.json, color=args.color)
    summary: dict[str, Any] = {"command": f"{args.command} {args.action}"}
    started = time.monotonic()
    code = ExitCode.OK
    try:
        code = work(output, summary)
    except KeyboardInterrupt:
        summary["interrupted"] = True
        note(_summary_line(summary))
    except PipeClosed:
        summary["pipe_closed"] = True
    except (ConfigError, QueryError, FieldPathError, UsageError) as exc:
        note(f"mailbus {args.command} {args.action}: {exc}")
        code = ExitCode.USAGE
    except MailbusError as exc:
        note(
            f"mailbus {args.command} {args.action}: {exc}\n"
            "  (is the server running, and --config the right file?)"
        )
        code = ExitCode.CONNECTION
    summary["exit"] = int(code)
    summary["seconds"] = round(time.monotonic() - started, 3)
    if args.stats:
        print(json.dumps(summary, default=str), file=sys.stderr, flush=True)
    return int(code)


def subcommand(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    name: str,
    help_text: str,
    example: str,
) -> argparse.ArgumentParser:
    """One `mailbus topic|service|participant ACTION` with the common options and its
    example at the end of its --help."""
    parser = actions.add_parser(
        name,
        help=help_text,
        parents=[common],
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(action=name)
    return parser


def usage_checked(handler: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """`handler` with its argument checks (a query, a path, a count) answered as USAGE."""

    def checked(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (QueryError, FieldPathError, UsageError, ConfigError) as exc:
            note(f"mailbus {args.command} {args.action}: {exc}")
            return int(ExitCode.USAGE)

    return checked


def _summary_line(summary: dict[str, Any]) -> str:
    shown = {k: v for k, v in summary.items() if k not in ("command", "interrupted")}
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in shown.items()]
    return f"{summary['command']}: " + (", ".join(parts) or "nothing received")

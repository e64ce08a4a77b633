"""What every shell tool does around its work: open the system the options name (or run
the demo inside the command with --demo) through a mailbox of its own, watch what
arrives, and turn each way of ending (done, Ctrl-C, a closed pipe, a bad option, an
unreachable server, a refused password, a message too large) into its exit code and one
line saying what to do."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import queue
import secrets
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

from mailbus.context import Context
from mailbus.errors import (
    ConfigError,
    CredentialsRefused,
    InvalidNameError,
    MailbusError,
    MessageTooLarge,
    TransportError,
)
from mailbus.field_path import FieldPathError
from mailbus.names import check_name
from mailbus.options import Options
from mailbus.query import QueryError
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, PipeClosed, note
from mailbus.trace import Kind, TraceEvent

INTERNAL_PREFIX = "_mailbus/"
# A fixed PostOffice box for the shell tools instead of one of their own per command.
BOX_ENV = "MAILBUS_POSTOFFICE_BOX"


class UsageError(ValueError):
    """Arguments that do not make sense together; the message says which."""


# Errors in what the user typed or configured: exit 2, no server hint.
USAGE_ERRORS = (ConfigError, QueryError, FieldPathError, InvalidNameError, UsageError)


class ShellParser(argparse.ArgumentParser):
    """A parser whose errors are one line (with where to read more), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def checked_name(name: str, what: str = "topic") -> str:
    """`name` if it can be a topic or service name (or a glob of them), else UsageError."""
    try:
        return check_name(name, what)
    except InvalidNameError as exc:
        raise UsageError(str(exc)) from None


def read_text(path: str, what: str = "--file") -> str:
    """The UTF-8 text of `path` ('-': stdin); UsageError saying why it cannot be read."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{what} {path}: not UTF-8 text (byte {exc.start}); a body is text, "
            "such as JSON (base64-encode binary data)"
        ) from None


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
    parser.add_argument(
        "--backlog",
        action="store_true",
        help=f"with {BOX_ENV}: also show letters waiting in that box from before this command",
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
        options = own_box(load_options(getattr(args, "config", None)))
        if options.transport == "postoffice" and not args.backlog:
            _empty_fixed_box(options)
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


def own_box(options: Options, environ: Mapping[str, str] | None = None) -> Options:
    """On PostOffice, the options with a box of this command's own: `MAILBUS_POSTOFFICE_BOX`
    if set, else a new one in the configured box's group, which the transport creates
    and removes on exit. So two commands on one options file work at once, and none
    reads letters left in a box by an earlier one."""
    env = os.environ if environ is None else environ
    table = dict(options.sections.get("postoffice", {}))
    configured = table.get("box")
    if options.transport != "postoffice" or not isinstance(configured, str) or not configured:
        return options  # the transport's own check says what is wrong
    if env.get(BOX_ENV):
        table["box"] = env[BOX_ENV]
    elif table.get("create", True) is True:
        parent, _, leaf = configured.rpartition(".")
        table.setdefault("group", parent)
        # Letters and digits only (a box name is a.b.c); the pid and a random part
        # keep commands from one another.
        unique = f"{leaf}sh{os.getpid()}x{secrets.token_hex(3)}"
        table["box"] = f"{parent}.{unique}" if parent else unique
        table["keep-boxes"] = False
    else:
        return options  # create = false: only the configured box exists
    sections = {**options.sections, "postoffice": table}
    return dataclasses.replace(options, sections=sections)


def _empty_fixed_box(options: Options) -> None:
    """Empty the box `MAILBUS_POSTOFFICE_BOX` names, so that what waits there from
    before is not shown as live (--backlog keeps it)."""
    if not os.environ.get(BOX_ENV):
        return
    from mailbus.postoffice.client import BoxInUse, NoSuchBox, NotAuthorized, PostOfficeError
    from mailbus.postoffice.transport import PostOfficeOptions

    opts = PostOfficeOptions.from_options(options)
    client = opts.client()
    try:
        client.check_out(opts.box, opts.password)
        client.empty()
    except NoSuchBox:
        pass  # the transport creates it, empty
    except NotAuthorized:
        raise CredentialsRefused(f"PostOffice refused the password for box {opts.box!r}") from None
    except BoxInUse:
        raise TransportError(
            f"box {opts.box!r} ({BOX_ENV}) is checked out by another connection: "
            f"unset {BOX_ENV} to give this command a box of its own"
        ) from None
    except PostOfficeError as exc:
        raise TransportError(f"PostOffice at {opts.host}:{opts.port}: {exc}") from exc
    finally:
        client.close()


def refuse_if_too_large(ctx: Context, name: str, body: str) -> None:
    """MessageTooLarge if the email carrying `body` on `name` is over what the
    transport delivers: the sender's own limit (PostOffice's letter limit), or over
    mail what the receivers read (`[mail] max-message-bytes`: a larger mail is sent,
    then skipped by every reader)."""
    sender = ctx.sender
    limit, option = sender.max_email_bytes, sender.limit_option
    if limit is None and ctx.options.transport == "email":
        from mailbus.mail.imap_receiver import DEFAULT_MAX_MESSAGE_BYTES

        mail = ctx.options.sections.get("mail", {})
        limit = mail.get("max-message-bytes", DEFAULT_MAX_MESSAGE_BYTES)
        option = "mail.max-message-bytes, what the receivers read"
    if not isinstance(limit, int):
        return
    from mailbus.email_message import encode

    size = len(encode(ctx.outgoing(name, body, {})))
    if size > limit:
        raise MessageTooLarge(
            f"the email is {size:,} bytes, over this transport's limit of {limit:,} bytes "
            f"({option})"
        )


def traffic_of(ctx: Context) -> Traffic:
    """Every email `ctx` receives. For a context from `open_system`, from its start: a
    mail context with `start-uid` reads its backlog at the first poll, which can come
    before the command's first line after `open_system` (it did, under load)."""
    traffic = _TRAFFIC.get(ctx)
    if traffic is None:
        traffic = _TRAFFIC[ctx] = Traffic(ctx)
    return traffic


POLL_S = 0.1  # how soon Ctrl-C (raised, or a flag set) is seen while waiting for an email


class Traffic:
    """Every email the context receives, whoever it is for, as trace events."""

    def __init__(self, ctx: Context) -> None:
        self._queue: queue.SimpleQueue[TraceEvent] = queue.SimpleQueue()
        ctx.tracer.add_listener(self._take)

    def _take(self, event: TraceEvent) -> None:
        if event.kind == Kind.RECEIVED:
            self._queue.put(event)

    def waiting(self) -> Iterator[TraceEvent]:
        """The emails already here, without waiting."""
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def next(
        self, deadline: float | None, stop: threading.Event | None = None
    ) -> TraceEvent | None:
        """The next email, or None once `deadline` (monotonic) has passed or `stop` is
        set."""
        while stop is None or not stop.is_set():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return None
            try:
                # Bounded so that Ctrl-C is seen promptly on every platform.
                return self._queue.get(timeout=POLL_S if wait is None else min(wait, POLL_S))
            except queue.Empty:
                continue
        return None


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
    where = f"mailbus {args.command} {args.action}"
    try:
        code = work(output, summary)
    except KeyboardInterrupt:
        summary["interrupted"] = True
    except PipeClosed:
        summary["pipe_closed"] = True
    except USAGE_ERRORS as exc:
        note(f"{where}: {exc}")
        code = ExitCode.USAGE
    except CredentialsRefused as exc:
        note(f"{where}: {exc} (check the password in --config or the environment)")
        code = ExitCode.USAGE
    except MessageTooLarge as exc:
        note(f"{where}: not sent: {exc}")
        code = ExitCode.FAILED
    except TransportError as exc:
        note(f"{where}: {exc}\n  (is the server running, and --config the right file?)")
        code = ExitCode.CONNECTION
    except MailbusError as exc:
        note(f"{where}: {exc}")
        code = ExitCode.FAILED
    if summary.get("interrupted"):
        note(_summary_line(summary))
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
    parser: argparse.ArgumentParser = actions.add_parser(
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
        except USAGE_ERRORS as exc:
            note(f"mailbus {args.command} {args.action}: {exc}")
            return int(ExitCode.USAGE)

    return checked


def listen(
    traffic: Traffic,
    deadline: float | None,
    take: Callable[[TraceEvent], object],
    summary: dict[str, Any],
) -> None:
    """Feed `take` every email until `deadline`; Ctrl-C ends the listening, not the
    command, so that what was gathered is still printed (then the summary line).

    Ctrl-C sets a flag rather than raising: raised, it could land between an email
    taken from the queue and `take` counting it, and that email was lost."""
    with ctrl_c_sets() as pressed:
        while (event := traffic.next(deadline, pressed)) is not None:
            take(event)
    if pressed.is_set():
        summary["interrupted"] = True
        for event in traffic.waiting():  # arrived before the Ctrl-C: gathered too
            take(event)


@contextlib.contextmanager
def ctrl_c_sets() -> Iterator[threading.Event]:
    """An event that SIGINT sets while the block runs (in the main thread; elsewhere
    no signal arrives and Ctrl-C stays KeyboardInterrupt). Only read it (`is_set`) in
    the main thread: the handler's set() takes the event's lock, and a wait() there
    could be holding it."""
    pressed = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: pressed.set())
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def positive(kind: type[float] | type[int], text_name: str) -> Callable[[str], Any]:
    """An argparse type: a finite number above 0 (`--seconds`, `--rate`, `--count`)."""

    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (0 < value < float("inf")):
            raise argparse.ArgumentTypeError(f"{text_name} must be above 0, not {text}")
        return value

    parse.__name__ = text_name
    return parse


def _summary_line(summary: dict[str, Any]) -> str:
    shown = {k: v for k, v in summary.items() if k not in ("command", "interrupted")}
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in shown.items()]
    return f"{summary['command']}: " + (", ".join(parts) or "nothing received")

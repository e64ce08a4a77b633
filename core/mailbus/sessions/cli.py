"""`mailbus record`, `mailbus replay` and `mailbus analyze`."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

# Kept here rather than imported so that building the parser loads neither polars,
# pyarrow nor narwhals (tests check these match the modules' own constants).
ENGINES = ("polars", "spark")
TABLE_NAMES = ("topics", "services", "calls", "orphans", "sequences")
DEFAULT_BODY_CAP = 64 * 1024
DEFAULT_RAW_CAP = 64 * 1024
DEFAULT_MAX_QUEUED = 20_000

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class Progress:
    """One status line on stderr: rewritten in place on a terminal, a line every few
    seconds otherwise (logs stay readable)."""

    def __init__(self, stream: TextIO | None = None, every: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every
        self._last = 0.0
        self._width = 0

    def show(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            pad = max(self._width - len(text), 0)
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        elif force or now - self._last >= self.every:
            self.stream.write(text + "\n")
            self._last = now
        self.stream.flush()

    def done(self, text: str = "") -> None:
        if text:
            self.show(text, force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def bar(done: int, total: int, width: int = 24) -> str:
    filled = width if total <= 0 else min(width, done * width // total)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _error(command: str, message: object) -> int:
    print(f"mailbus {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM ask for a clean stop (final flush) instead of killing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _context(args: argparse.Namespace) -> Any:
    from mailbus.context import Context
    from mailbus.options import load_options

    return Context(load_options(args.config))


# -- record ---------------------------------------------------------------------------
def _record(args: argparse.Namespace) -> int:
    from mailbus.errors import MailbusError
    from mailbus.sessions.recorder import Recorder, RecorderError

    stop = threading.Event()
    progress = Progress()
    try:
        context = _context(args)
        recorder = Recorder(
            args.session,
            include=args.include,
            exclude=args.exclude,
            body_cap=args.body_cap,
            raw_cap=args.raw_cap,
            max_queued=args.max_queued,
            max_part_bytes=int(args.part_mb * 1024 * 1024),
            max_part_seconds=args.part_seconds,
        )
    except (MailbusError, RecorderError, ValueError, OSError) as exc:
        return _error("record", exc)
    demo = None
    started = time.monotonic()
    try:
        with context, _stop_on_signals(stop):
            recorder.attach(context)
            if args.demo:
                from mailbus.demo import DemoSystem

                demo = DemoSystem(context)
                demo.start()
            while not stop.wait(0.5):  # the display's pace; stop wakes it at once
                elapsed = time.monotonic() - started
                s = recorder.status()
                events = s["written"] + s["queued"]
                progress.show(
                    f"recording {args.session}  {elapsed:7.1f}s  events {events:>9}"
                    f"  parts {s['parts']:>3}  dropped {s['dropped']:>6}"
                    f"  filtered {s['filtered']:>6}"
                )
                if args.seconds is not None and elapsed >= args.seconds:
                    break
                if not recorder.alive:
                    break
            if demo is not None:
                demo.stop()
    except (MailbusError, OSError) as exc:
        progress.done()
        _error("record", exc)
        return EXIT_ERROR
    finally:
        try:
            manifest = recorder.stop()
        except RecorderError as exc:
            progress.done()
            return _error("record", exc)
    counts = manifest["counts"]
    progress.done(
        f"recorded {counts['events']} events in {len(manifest['parts'])} parts to {args.session}"
        + (f" ({counts['dropped']} dropped: queue full)" if counts["dropped"] else "")
    )
    return EXIT_OK


# -- replay ---------------------------------------------------------------------------
def _session_index(session: Any, progress: Progress) -> Any:
    """The session's index, built (with a progress line) when it has none; what was done
    (built, rebuilt, kept in memory) is said on stderr."""
    from mailbus.sessions.index import load_index

    def building(done: int, total: int) -> None:
        progress.show(f"indexing {session.name} {bar(done, total)} {done:,}/{total:,} rows")

    index = load_index(session, progress=building)
    if index.notes:
        progress.done()
        for note in index.notes:
            print(f"mailbus replay: {session.name}: {note}", file=sys.stderr)
    return index


def _replay(args: argparse.Namespace) -> int:
    from mailbus.errors import MailbusError
    from mailbus.sessions.mock import ServiceMock
    from mailbus.sessions.player import Player
    from mailbus.sessions.reader import SessionError, open_session
    from mailbus.sessions.recorder import Recorder, RecorderError
    from mailbus.sessions.replay_options import (
        check_offset,
        check_prefix,
        check_rate,
        compile_filter,
        parse_remap,
    )

    stop = threading.Event()
    progress = Progress()
    try:
        # Checked first, named as the user typed them (inf, nan, a broken regex).
        check_rate(args.rate)
        check_offset(args.start, "--start")
        if args.stop is not None:
            check_offset(args.stop, "--stop")
        compile_filter(args.include, "--include")
        compile_filter(args.exclude, "--exclude")
        session = open_session(args.session, allow_empty=False, skip_bad_parts=args.skip_bad_parts)
        remap = parse_remap(args.remap)
        check_prefix(args.prefix)
        index = _session_index(session, progress)
        context = _context(args)
    except (SessionError, MailbusError, ValueError, OSError) as exc:
        progress.done()
        return _error("replay", exc)
    recorder: Recorder | None = None
    mocks: list[ServiceMock] = []
    player: Player | None = None
    try:
        with context, _stop_on_signals(stop):
            if args.record:
                recorder = Recorder(args.record, context=context)
            for service in args.mock:
                mocks.append(ServiceMock(session, context, service, delay=args.mock_delay).start())
            if not args.mock_only:
                player = Player(
                    session,
                    context,
                    rate=args.rate,
                    loop=args.loop,
                    start_s=args.start,
                    stop_s=args.stop,
                    include=args.include,
                    exclude=args.exclude,
                    remap=remap,
                    prefix=args.prefix,
                    services=not args.no_services,
                    read_ahead=args.read_ahead,
                    index=index,
                ).start()
            while not stop.wait(0.2):
                if player is not None:
                    done = player.sent % max(player.total, 1) if args.loop else player.sent
                    text = (
                        f"replay {bar(done, player.total)} {player.sent}/{player.total}"
                        f"  at {player.position_s:8.2f}s  x{args.rate:g}"
                        + (f"  loop {player.loops}" if args.loop else "")
                    )
                else:
                    text = "mocking " + ", ".join(
                        f"{m.service}: {m.answered} answered" for m in mocks
                    )
                progress.show(text)
                if player is not None and player.done.is_set() and not mocks:
                    break
            if player is not None:
                player.stop()
            for mock in mocks:
                mock.stop()
    except (RecorderError, ValueError, MailbusError, OSError) as exc:
        progress.done()
        return _error("replay", exc)
    finally:
        if recorder is not None:
            recorder.stop()
    summary = []
    if player is not None and player.read_error:
        progress.done(f"replayed {player.sent} of {player.total} emails")
        return _error("replay", f"reading the session failed: {player.read_error}")
    if player is not None:
        summary.append(f"replayed {player.sent} of {player.total} emails")
        if player.errors:
            summary.append(f"{player.errors} failed")
        if player.truncated_bodies:
            summary.append(f"{player.truncated_bodies} with bodies cut at the recording cap")
    summary += [f"mock {m.service} answered {m.answered}" for m in mocks]
    progress.done("; ".join(summary))
    return EXIT_OK


# -- analyze --------------------------------------------------------------------------
def _analyze(args: argparse.Namespace) -> int:
    import polars as pl

    from mailbus.sessions import analysis
    from mailbus.sessions.reader import SessionError

    progress = Progress()
    started = time.monotonic()

    def report(table: str, done: int, total: int) -> None:
        elapsed = time.monotonic() - started
        label = f"computing {table}" if table else "done"
        progress.show(
            f"analyze ({args.engine}) {bar(done, total)} {label}  {elapsed:6.1f}s", force=not table
        )

    try:
        if args.engine == "spark":
            progress.show("starting Spark...", force=True)
        dataset = analysis.load(
            args.sessions,
            engine=args.engine,
            master=args.master,
            remote=args.remote,
            skip_bad_parts=args.skip_bad_parts,
        )
        for s in dataset.sessions:
            for path, why in s.skipped:
                print(f"mailbus analyze: skipped {path}: {why}", file=sys.stderr)
            if not s.parts:
                print(
                    f"mailbus analyze: session {s.path} is empty (no complete part)",
                    file=sys.stderr,
                )
        tables = args.table or analysis.TABLES
        if args.format == "parquet":
            # Written by the engine that computed them: on Spark, from its executors.
            out = args.output or "analysis"
            counts = analysis.write_tables(dataset, out, tables=tables, progress=report)
        else:
            results = analysis.analyze(dataset, tables=tables, progress=report)
    except (SessionError, ValueError) as exc:
        progress.done()
        return _error("analyze", exc)
    except ImportError as exc:
        progress.done()
        return _error("analyze", f"engine {args.engine} is not available: {exc}")
    progress.done()
    if args.format == "parquet":
        for name, rows in counts.items():
            print(f"{name}: {rows} rows", file=sys.stderr)
        print(f"wrote {len(counts)} tables to {str(out).rstrip('/')}/", file=sys.stderr)
        return EXIT_OK
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in results.items():
            frame.write_parquet(out / f"{name}.parquet")
        print(f"wrote {len(results)} tables to {out}/", file=sys.stderr)
    if args.format == "json":
        print(json.dumps({name: f.to_dicts() for name, f in results.items()}, default=str))
    elif args.format == "table":
        with pl.Config(tbl_rows=50, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=40):
            for name, frame in results.items():
                print(f"== {name} ({frame.height} rows)")
                print(frame)
    return EXIT_OK


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _size_mb(text: str) -> float:
    value = _positive(text)
    if not math.isfinite(value) or value > 1024 * 1024:  # a part of up to a terabyte
        raise argparse.ArgumentTypeError(f"must be at most {1024 * 1024} MB, got {text}")
    return value


def _read_ahead(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text}") from None
    if not 1 <= value <= 10_000_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 10000000, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


class _EngineAction(argparse.Action):
    """--engine, remembering that the user chose it (so --master cannot override it)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.engine_given = True


class _SparkAction(argparse.Action):
    """--master / --remote: run on Spark unless --engine said otherwise (load() then
    refuses the mix with a clear error)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        if not getattr(namespace, "engine_given", False):
            namespace.engine = "spark"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = sub.add_parser("record", help="record this participant's traffic to a session")
    record.add_argument("session", metavar="SESSION_DIR", help="new directory for the session")
    record.add_argument("--seconds", type=_positive, help="stop after N seconds (else Ctrl-C)")
    record.add_argument("--include", metavar="REGEX", help="only topics/services matching")
    record.add_argument("--exclude", metavar="REGEX", help="leave out topics/services matching")
    record.add_argument("--body-cap", type=int, default=DEFAULT_BODY_CAP, metavar="BYTES")
    record.add_argument(
        "--raw-cap",
        type=int,
        default=DEFAULT_RAW_CAP,
        metavar="BYTES",
        help="record a received email's raw bytes when at most this many (0: never)",
    )
    record.add_argument("--max-queued", type=int, default=DEFAULT_MAX_QUEUED, metavar="EVENTS")
    record.add_argument("--part-mb", type=_size_mb, default=64.0, help="split parts at this size")
    record.add_argument("--part-seconds", type=_positive, default=300.0, help="...or this age")
    record.add_argument("--demo", action="store_true", help="run the demo system and record it")
    record.set_defaults(handler=_record)

    replay = sub.add_parser("replay", help="replay a session with its timing; mock services")
    replay.add_argument("session", metavar="SESSION_DIR")
    replay.add_argument("--rate", type=_positive, default=1.0, help="speed factor (2 = twice)")
    replay.add_argument("--loop", action="store_true", help="start again at the end")
    replay.add_argument("--start", type=_non_negative, default=0.0, metavar="S")
    replay.add_argument("--stop", type=_non_negative, default=None, metavar="S")
    replay.add_argument("--include", metavar="REGEX")
    replay.add_argument("--exclude", metavar="REGEX")
    replay.add_argument("--remap", action="append", default=[], metavar="OLD=NEW")
    replay.add_argument(
        "--prefix", default="", help="replay every name under this prefix (e.g. replay/)"
    )
    replay.add_argument("--no-services", action="store_true", help="replay messages only")
    replay.add_argument(
        "--mock",
        action="append",
        default=[],
        metavar="SERVICE",
        help="answer live requests to SERVICE with recorded responses",
    )
    replay.add_argument("--mock-delay", action="store_true", help="mock with recorded RTTs")
    replay.add_argument("--mock-only", action="store_true", help="mock, do not replay")
    replay.add_argument("--record", metavar="SESSION_DIR", help="record the replay too")
    replay.add_argument("--skip-bad-parts", action="store_true")
    replay.add_argument(
        "--read-ahead",
        type=_read_ahead,
        default=1000,
        metavar="N",
        help="emails read ahead of the sender (memory bound; default 1000)",
    )
    replay.set_defaults(handler=_replay)

    analyze = sub.add_parser("analyze", help="per-topic, service and sequence statistics")
    analyze.add_argument(
        "sessions", nargs="+", metavar="SESSION", help="session directories or quoted globs"
    )
    analyze.add_argument("--engine", choices=ENGINES, default="polars", action=_EngineAction)
    where = analyze.add_mutually_exclusive_group()
    where.add_argument(
        "--master",
        metavar="URL",
        action=_SparkAction,
        help="Spark master: local[N] (default local[*]) or spark://HOST:7077; implies spark",
    )
    where.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        action=_SparkAction,
        help="run on a Spark Connect server (thin client, no local JVM); implies spark",
    )
    analyze.add_argument("--format", choices=("table", "json", "parquet"), default="table")
    analyze.add_argument(
        "--output", "--out", metavar="DIR", help="write each table as DIR/<table>.parquet"
    )
    analyze.add_argument("--table", action="append", choices=TABLE_NAMES, help="only these")
    analyze.add_argument("--skip-bad-parts", action="store_true")
    analyze.set_defaults(handler=_analyze)

"""`mailbus topic list|echo|hz|bw|delay|pub|info`: what `ros2 topic` and mosquitto_sub
give their users, over any transport."""

from __future__ import annotations

import argparse
import fnmatch
import json
import time
from typing import Any

from mailbus import field_path, query
from mailbus import headers as H
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, note
from mailbus.shell.presence_view import Presence, entity_info
from mailbus.shell.session import (
    INTERNAL_PREFIX,
    UsageError,
    deadline_after,
    open_system,
    run,
    subcommand,
    traffic_of,
    usage_checked,
)
from mailbus.shell.stats import Window
from mailbus.trace import TraceEvent

EXAMPLES = {
    "list": "mailbus topic list --counts --seconds 5",
    "echo": "mailbus topic echo 'sensors/*' --where 'celsius>25' --field celsius --count 3",
    "hz": "mailbus topic hz robot/pose --window 100",
    "bw": "mailbus topic bw robot/pose",
    "delay": "mailbus topic delay robot/pose",
    "pub": "mailbus topic pub lab/cmd '{\"go\": true}' --rate 10 --times 50",
    "info": "mailbus topic info robot/pose",
}


def is_message(event: TraceEvent) -> bool:
    return H.CLIENT_GID not in event.headers


def matcher(pattern: str) -> Any:
    """A topic name or glob (`*`, `?`, `[..]`; MQTT's `#` means any rest)."""
    glob = pattern.replace("#", "*")
    internal = pattern.startswith(INTERNAL_PREFIX)
    if not any(c in glob for c in "*?["):
        return lambda name: name == pattern
    return lambda name: (
        fnmatch.fnmatchcase(name, glob) and (internal or not name.startswith(INTERNAL_PREFIX))
    )


def register(topics: argparse._SubParsersAction[argparse.ArgumentParser], common: Any) -> None:
    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        return subcommand(topics, common, name, help_text, EXAMPLES[name])

    listing = sub("list", "topics flowing now, from traffic and participant announcements")
    listing.add_argument("--counts", action="store_true", help="with messages seen per topic")
    listing.add_argument("--seconds", type=float, default=3.0, help="how long to listen (3)")
    listing.set_defaults(handler=usage_checked(_list))

    echo = sub("echo", "print the messages of a topic or glob as they arrive")
    echo.add_argument("topic", help="a topic or a glob ('sensors/*', '#')")
    echo.add_argument("--where", metavar="QUERY", help="only messages where this holds")
    echo.add_argument("--field", metavar="PATH", help="print only this field of the body")
    echo.add_argument("--count", type=int, help="stop after N messages")
    echo.add_argument("--once", action="store_true", help="stop after the first (--count 1)")
    echo.add_argument("--raw", action="store_true", help="the email as it arrived")
    echo.add_argument(
        "--seconds", type=float, help="give up after S seconds (exit 1 if nothing came)"
    )
    echo.set_defaults(handler=usage_checked(_echo))

    for name, text, handler in (
        ("hz", "the rate of a topic, from its publishers' timestamps", _hz),
        ("bw", "bytes per second and mean size of a topic", _bw),
        ("delay", "source timestamp to arrival, p50/p95/max", _delay),
    ):
        parser = sub(name, text)
        parser.add_argument("topic")
        parser.add_argument("--window", type=int, default=100, help="messages per report (100)")
        parser.add_argument("--seconds", type=float, help="stop after S seconds")
        parser.set_defaults(handler=usage_checked(handler))

    pub = sub("pub", "publish a message, once or at a rate")
    pub.add_argument("topic")
    pub.add_argument("body", nargs="?", help="the body (or --file)")
    pub.add_argument("--file", help="read the body from this file ('-': stdin)")
    pub.add_argument("--rate", type=float, help="messages per second (with --times)")
    pub.add_argument("--times", type=int, default=1, help="how many (1)")
    pub.set_defaults(handler=usage_checked(_pub))

    info = sub("info", "who publishes and subscribes to a topic (from announcements)")
    info.add_argument("topic")
    info.add_argument("--seconds", type=float, default=3.0, help="how long to listen (3)")
    info.set_defaults(handler=usage_checked(_info))


# -- echo -------------------------------------------------------------------------------------
def _echo(args: argparse.Namespace) -> int:
    where = query.parse_where(args.where) if args.where else None
    path = field_path.parse(args.field) if args.field else None
    count = 1 if args.once else args.count
    if count is not None and count < 1:
        raise UsageError("--count must be at least 1")
    wanted = matcher(args.topic)

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        summary["received"] = 0
        with open_system(args, listen=True) as ctx:
            traffic = traffic_of(ctx)
            deadline = deadline_after(args.seconds)
            while count is None or summary["received"] < count:
                event = traffic.next(deadline)
                if event is None:
                    if summary["received"] == 0:
                        note(f"no message on {args.topic} within {args.seconds:g} s")
                        return ExitCode.FAILED
                    return ExitCode.OK
                if not (wanted(event.name) and is_message(event)):
                    continue
                if where is not None and not where.matches(event):
                    continue
                _print_message(out, event, path, args.raw)
                summary["received"] += 1
        return ExitCode.OK

    return run(args, work)


def _print_message(
    out: Output, event: TraceEvent, path: field_path.FieldPath | None, raw: bool
) -> None:
    record: dict[str, Any] = {
        "topic": event.name,
        "message_id": event.message_id,
        "source_timestamp_ns": event.source_timestamp_ns,
        "reception_timestamp_ns": event.reception_timestamp_ns,
    }
    if path is not None:
        value = path.get(field_path.decode(event.body))
        value = None if value is field_path.MISSING else value
        record["field"] = str(path)
        record["value"] = value
        text = value if isinstance(value, str) else json.dumps(value)
    elif raw:
        data = event.raw if event.raw is not None else _rebuilt(event)
        record["raw"] = data.decode("utf-8", "replace")
        text = record["raw"]
    else:
        record["headers"] = dict(event.headers)
        record["body"] = event.body
        text = event.body or ""
    out.emit(f"{out.bold(event.name)} {text}", record)


def _rebuilt(event: TraceEvent) -> bytes:
    from mailbus.email_message import Email, to_bytes

    email = Email(subject=event.name, body=event.body or "", headers=dict(event.headers))
    return to_bytes(email)


# -- hz, bw, delay ----------------------------------------------------------------------------
def _measure(args: argparse.Namespace, report: Any) -> int:
    if args.window < 2:
        raise UsageError("--window must be at least 2")

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        window = Window(args.window)
        summary["received"] = 0
        last_report = time.monotonic()
        with open_system(args, listen=True) as ctx:
            traffic = traffic_of(ctx)
            deadline = deadline_after(args.seconds)
            while True:
                event = traffic.next(min(deadline or float("inf"), last_report + 1.0))
                now = time.monotonic()
                if event is not None and event.name == args.topic and is_message(event):
                    sent = event.source_timestamp_ns or event.reception_timestamp_ns
                    window.add(sent, event.reception_timestamp_ns, event.size)
                    summary["received"] += 1
                if now - last_report >= 1.0:
                    last_report = now
                    report(out, window, summary)
                if deadline is not None and now >= deadline:
                    report(out, window, summary)
                    return ExitCode.OK if summary["received"] else ExitCode.FAILED

    return run(args, work)


def _hz(args: argparse.Namespace) -> int:
    def report(out: Output, window: Window, summary: dict[str, Any]) -> None:
        rate = window.rate()
        if rate is None:
            return
        summary["rate_hz"] = round(rate.rate_hz, 3)
        out.emit(
            f"average rate: {rate.rate_hz:.3f} Hz\n"
            f"\tmin: {rate.min_s:.6f}s max: {rate.max_s:.6f}s std dev: {rate.std_s:.6f}s "
            f"window: {rate.count}",
            {
                "topic": args.topic,
                "rate_hz": rate.rate_hz,
                "min_s": rate.min_s,
                "max_s": rate.max_s,
                "std_s": rate.std_s,
                "window": rate.count,
            },
        )

    return _measure(args, report)


def _bw(args: argparse.Namespace) -> int:
    def report(out: Output, window: Window, summary: dict[str, Any]) -> None:
        found = window.bandwidth()
        if found is None:
            return
        per_s, mean = found
        summary["bytes_per_s"] = round(per_s, 1)
        out.emit(
            f"{per_s:,.0f} B/s from {len(window.sizes)} messages  mean size {mean:,.0f} B",
            {
                "topic": args.topic,
                "bytes_per_s": per_s,
                "mean_bytes": mean,
                "window": len(window.sizes),
            },
        )

    return _measure(args, report)


def _delay(args: argparse.Namespace) -> int:
    def report(out: Output, window: Window, summary: dict[str, Any]) -> None:
        found = window.delays()
        if found is None:
            return
        p50, p95, worst = found
        summary["delay_p50_ms"] = round(p50 * 1e3, 3)
        out.emit(
            f"delay p50 {p50 * 1e3:.2f} ms  p95 {p95 * 1e3:.2f} ms  max {worst * 1e3:.2f} ms  "
            f"window {len(window.sent_ns)}",
            {
                "topic": args.topic,
                "p50_ms": p50 * 1e3,
                "p95_ms": p95 * 1e3,
                "max_ms": worst * 1e3,
                "window": len(window.sent_ns),
            },
        )

    return _measure(args, report)


# -- pub ----------------------------------------------------------------------------------------
def _pub(args: argparse.Namespace) -> int:
    import sys

    if (args.body is None) == (args.file is None):
        raise UsageError("give the body or --file, not both")
    if args.file == "-":
        body = sys.stdin.read()
    elif args.file is not None:
        with open(args.file, encoding="utf-8") as handle:
            body = handle.read()
    else:
        body = args.body
    if args.times < 1 or (args.rate is not None and args.rate <= 0):
        raise UsageError("--times must be at least 1 and --rate above 0")

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        summary["published"] = 0
        with open_system(args) as ctx:
            publisher = ctx.publisher(args.topic)
            started = time.monotonic()
            for i in range(args.times):
                if args.rate is not None:
                    # The publishing schedule itself, not a synchronisation.
                    time.sleep(max(0.0, started + i / args.rate - time.monotonic()))
                message_id = publisher.publish(body)
                summary["published"] += 1
                out.emit(
                    f"published {args.topic} {message_id}",
                    {"topic": args.topic, "message_id": message_id},
                )
        return ExitCode.OK

    return run(args, work)


# -- list and info --------------------------------------------------------------------------------
def _list(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        counts: dict[str, int] = {}
        presence = Presence()
        with open_system(args, listen=True) as ctx:
            traffic = traffic_of(ctx)
            deadline = deadline_after(args.seconds)
            while (event := traffic.next(deadline)) is not None:
                if presence.take(event) or not is_message(event):
                    continue
                counts[event.name] = counts.get(event.name, 0) + 1
        for name in presence.topics():
            counts.setdefault(name, 0)
        summary["topics"] = len(counts)
        for name in sorted(counts):
            human = f"{name}  {counts[name]}" if args.counts else name
            out.emit(human, {"topic": name, "count": counts[name]})
        return ExitCode.OK

    return run(args, work)


def _info(args: argparse.Namespace) -> int:
    return entity_info(args, "topic", args.topic, ("publisher", "subscription"))

"""`mailbus topic list|echo|hz|bw|delay|pub|info`: what `ros2 topic` and mosquitto_sub
give their users, over any transport."""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mailbus import field_path, query
from mailbus import headers as H
from mailbus.shell.completion import complete_names
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, note
from mailbus.shell.presence_view import Presence, entity_info
from mailbus.shell.session import (
    INTERNAL_PREFIX,
    POLL_S,
    UsageError,
    checked_name,
    ctrl_c_sets,
    deadline_after,
    listen,
    open_system,
    positive,
    read_text,
    refuse_if_too_large,
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
    "hz": "mailbus topic hz robot/pose 'sensors/+' --window 100",
    "bw": "mailbus topic bw robot/pose",
    "delay": "mailbus topic delay robot/pose",
    "pub": "mailbus topic pub lab/cmd '{\"go\": true}' --rate 10   # until Ctrl-C",
    "info": "mailbus topic info robot/pose",
}
# Delivery failures the transports trace (postoffice.background, mail.smtp_sender).
SEND_FAILURES = frozenset(
    {
        "postoffice.send_failed",
        "postoffice.send_abandoned",
        "mail.send_rejected",
        "mail.send_abandoned",
    }
)
QUIET_NOTE_S = 2.0  # hz/bw/delay say they are still waiting after this


def is_message(event: TraceEvent) -> bool:
    return H.CLIENT_GID not in event.headers


def glob_regex(pattern: str) -> str:
    """A topic glob as a regular expression. `*` and `?` stay within one level (never
    cross `/`); `**` and MQTT's `#` take any rest; MQTT's `+` is one whole level;
    `[...]` a character class."""
    levels = pattern.split("/")
    out: list[str] = []
    for n, level in enumerate(levels):
        if n:
            out.append("/")
        if level == "+":
            out.append("[^/]*")
            continue
        if level == "#" and n == len(levels) - 1:
            if n:  # `a/#` is `a` and everything under it, as in MQTT
                out[-1] = "(?:/.*)?"
            else:
                out.append(".*")
            continue
        i = 0
        while i < len(level):
            c = level[i]
            if level.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "#":
                out.append(".*")
            elif c == "[" and (end := level.find("]", i + 2)) != -1:
                inner = level[i + 1 : end]
                negate = inner.startswith("!")
                inner = inner[1:] if negate else inner
                out.append("[" + ("^" if negate else "") + inner.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
            else:
                out.append(re.escape(c))
            i += 1
    return "".join(out)


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[#") or "+" in pattern.split("/")


def matcher(*patterns: str) -> Callable[[str], bool]:
    """Names matching any of `patterns`: a topic name, or a glob (`glob_regex`). A glob
    matches internal `_mailbus/` topics only when it starts with that prefix."""
    exact = {p for p in patterns if not is_glob(p)}
    globs = [
        (re.compile(glob_regex(p), re.DOTALL), p.startswith(INTERNAL_PREFIX))
        for p in patterns
        if is_glob(p)
    ]

    def matches(name: str) -> bool:
        if name in exact:
            return True
        return any(
            regex.fullmatch(name) and (internal or not name.startswith(INTERNAL_PREFIX))
            for regex, internal in globs
        )

    return matches


def register(topics: argparse._SubParsersAction[argparse.ArgumentParser], common: Any) -> None:
    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        return subcommand(topics, common, name, help_text, EXAMPLES[name])

    seconds = positive(float, "seconds")
    listing = sub("list", "topics flowing now, from traffic and participant announcements")
    listing.add_argument("--counts", action="store_true", help="with messages seen per topic")
    listing.add_argument("--seconds", type=seconds, default=3.0, help="how long to listen (3)")
    listing.set_defaults(handler=usage_checked(_list))

    echo = sub("echo", "print the messages of a topic or glob as they arrive")
    complete_names(
        echo.add_argument(
            "topic", help="a topic or a glob ('sensors/*', 'a/+/b', '#'; * stays within a level)"
        ),
        "topic",
    )
    echo.add_argument(
        "--where", metavar="QUERY", help="only messages where this holds (also /regex/)"
    )
    echo.add_argument("--field", metavar="PATH", help="print only this field of the body")
    echo.add_argument("--count", type=positive(int, "count"), help="stop after N messages")
    echo.add_argument("--once", action="store_true", help="stop after the first (--count 1)")
    echo.add_argument("--raw", action="store_true", help="the email as it arrived")
    echo.add_argument(
        "--timestamp", action="store_true", help="start each line with the arrival time"
    )
    echo.add_argument(
        "--body-only", action="store_true", help="print the body (or field) alone, no topic"
    )
    echo.add_argument(
        "--truncate-length",
        "-l",
        type=positive(int, "truncate-length"),
        metavar="N",
        help="cut what is printed to N characters (human output)",
    )
    echo.add_argument(
        "--seconds", type=seconds, help="give up after S seconds (exit 1 if nothing came)"
    )
    echo.set_defaults(handler=usage_checked(_echo))

    for name, text, handler in (
        ("hz", "the rate of topics, from their publishers' timestamps", _hz),
        ("bw", "bytes per second and mean size of topics", _bw),
        ("delay", "source timestamp to arrival, p50/p95/max", _delay),
    ):
        parser = sub(name, text)
        complete_names(
            parser.add_argument("topic", nargs="+", help="topics or globs, each measured apart"),
            "topic",
        )
        parser.add_argument(
            "--window", type=positive(int, "window"), default=100, help="messages (100)"
        )
        parser.add_argument("--seconds", type=seconds, help="stop after S seconds")
        parser.set_defaults(handler=usage_checked(handler))

    pub = sub("pub", "publish a message, once, N times or at a rate until Ctrl-C")
    complete_names(pub.add_argument("topic"), "topic")
    pub.add_argument("body", nargs="?", help="the body (or --file)")
    pub.add_argument("--file", help="read the body from this file ('-': stdin)")
    pub.add_argument(
        "--rate", type=positive(float, "rate"), help="messages per second, until Ctrl-C or --times"
    )
    pub.add_argument(
        "--times", type=positive(int, "times"), help="how many (1, or no end with --rate)"
    )
    pub.set_defaults(handler=usage_checked(_pub))

    info = sub("info", "who publishes and subscribes to a topic (from announcements)")
    complete_names(info.add_argument("topic"), "topic")
    info.add_argument("--seconds", type=seconds, default=3.0, help="how long to listen (3)")
    info.set_defaults(handler=usage_checked(_info))


# -- echo -------------------------------------------------------------------------------------
def _echo(args: argparse.Namespace) -> int:
    checked_name(args.topic, "topic (or glob)")
    where = query.parse_where(args.where) if args.where is not None else None
    path = field_path.parse(args.field) if args.field is not None else None
    count = 1 if args.once else args.count
    wanted = matcher(args.topic)

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        summary["received"] = 0
        without_field: set[str] = set()
        with open_system(args, listen=True) as ctx:
            traffic = traffic_of(ctx)
            deadline = deadline_after(args.seconds)
            while count is None or summary["received"] < count:
                event = traffic.next(deadline)
                if event is None:
                    if summary["received"]:
                        return ExitCode.OK
                    what = f" with field {args.field}" if without_field else ""
                    note(f"no message on {args.topic}{what} within {args.seconds:g} s")
                    return ExitCode.FAILED
                if not (wanted(event.name) and is_message(event)):
                    continue
                if where is not None and not where.matches(event):
                    continue
                if path is not None and path.get(field_path.decode(event.body)) is (
                    field_path.MISSING
                ):
                    if event.name not in without_field:
                        without_field.add(event.name)
                        note(f"a message on {event.name} has no field {path} (skipped)")
                    continue
                _print_message(out, event, path, args)
                summary["received"] += 1
        return ExitCode.OK

    return run(args, work)


def _print_message(
    out: Output, event: TraceEvent, path: field_path.FieldPath | None, args: argparse.Namespace
) -> None:
    record: dict[str, Any] = {
        "topic": event.name,
        "message_id": event.message_id,
        "source_timestamp_ns": event.source_timestamp_ns,
        "reception_timestamp_ns": event.reception_timestamp_ns,
    }
    if path is not None:
        value = path.get(field_path.decode(event.body))
        record["field"] = str(path)
        record["value"] = value
        text = value if isinstance(value, str) else json.dumps(value)
    elif args.raw:
        data = event.raw if event.raw is not None else _rebuilt(event)
        record["raw"] = data.decode("utf-8", "replace")
        text = record["raw"]
    else:
        record["headers"] = dict(event.headers)
        record["body"] = event.body
        text = event.body or ""
    limit = args.truncate_length
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    human = text if args.body_only else f"{out.bold(event.name)} {text}"
    if args.timestamp:
        arrived = event.reception_timestamp_ns or time.time_ns()
        stamp = datetime.fromtimestamp(arrived / 1e9, UTC).isoformat(timespec="milliseconds")
        human = f"{out.dim(stamp)} {human}"
    out.emit(human, record)


def _rebuilt(event: TraceEvent) -> bytes:
    from mailbus.email_message import Email, to_bytes

    email = Email(subject=event.name, body=event.body or "", headers=dict(event.headers))
    return to_bytes(email)


# -- hz, bw, delay ----------------------------------------------------------------------------
Report = Callable[[Output, str, Window, dict[str, Any]], bool]


def _measure(args: argparse.Namespace, report: Report) -> int:
    """Feed each topic matching `args.topic` its own window; every second, `report`
    each window (it returns False while the window has too little to say)."""
    for pattern in args.topic:
        checked_name(pattern, "topic (or glob)")
    if args.window < 2:
        raise UsageError("--window must be at least 2")
    wanted = matcher(*args.topic)
    shown = " ".join(args.topic)

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        windows: dict[str, Window] = {}
        reported: set[str] = set()
        summary["received"] = 0
        started = last_report = time.monotonic()
        waiting_said = False
        with open_system(args, listen=True) as ctx:
            traffic = traffic_of(ctx)
            deadline = deadline_after(args.seconds)
            while True:
                event = traffic.next(min(deadline or float("inf"), last_report + 1.0))
                now = time.monotonic()
                if event is not None and wanted(event.name) and is_message(event):
                    sent = event.source_timestamp_ns or event.reception_timestamp_ns
                    window = windows.get(event.name)
                    if window is None:
                        window = windows[event.name] = Window(args.window)
                    window.add(sent, event.reception_timestamp_ns, event.size)
                    summary["received"] += 1
                if now - last_report >= 1.0 or (deadline is not None and now >= deadline):
                    last_report = now
                    for name in sorted(windows):
                        if report(out, name, windows[name], summary):
                            reported.add(name)
                    if not windows and not waiting_said and now - started >= QUIET_NOTE_S:
                        waiting_said = True
                        note(f"no message on {shown} yet (waiting; Ctrl-C to stop)")
                if deadline is not None and now >= deadline:
                    return _measured(args, windows, reported)

    return run(args, work)


def _measured(args: argparse.Namespace, windows: dict[str, Window], reported: set[str]) -> ExitCode:
    """The exit of a measurement that ran its --seconds, saying what it could not
    measure."""
    if not windows:
        note(f"no message on {' '.join(args.topic)} within {args.seconds:g} s")
        return ExitCode.FAILED
    for name in sorted(set(windows) - reported):
        total = windows[name].total
        note(
            f"{name}: {total} message{'s' * (total != 1)} in {args.seconds:g} s: too few to measure"
        )
    return ExitCode.OK if reported else ExitCode.FAILED


def _label(args: argparse.Namespace, name: str) -> str:
    """A topic's name ahead of its report when more than one can be measured."""
    return f"{name}: " if len(args.topic) > 1 or is_glob(args.topic[0]) else ""


def _hz(args: argparse.Namespace) -> int:
    def report(out: Output, name: str, window: Window, summary: dict[str, Any]) -> bool:
        rate = window.rate()
        if rate is None:
            return False
        summary["rate_hz"] = round(rate.rate_hz, 3)
        out.emit(
            f"{_label(args, name)}average rate: {rate.rate_hz:.3f} Hz\n"
            f"\tmin: {rate.min_s:.6f}s max: {rate.max_s:.6f}s std dev: {rate.std_s:.6f}s "
            f"window: {rate.count}",
            {
                "topic": name,
                "rate_hz": rate.rate_hz,
                "min_s": rate.min_s,
                "max_s": rate.max_s,
                "std_s": rate.std_s,
                "window": rate.count,
            },
        )
        return True

    return _measure(args, report)


def _bw(args: argparse.Namespace) -> int:
    def report(out: Output, name: str, window: Window, summary: dict[str, Any]) -> bool:
        found = window.bandwidth()
        if found is None:
            return False
        per_s, mean = found
        summary["bytes_per_s"] = round(per_s, 1)
        out.emit(
            f"{_label(args, name)}{per_s:,.0f} B/s from {len(window.sizes)} messages  "
            f"mean size {mean:,.0f} B",
            {
                "topic": name,
                "bytes_per_s": per_s,
                "mean_bytes": mean,
                "window": len(window.sizes),
            },
        )
        return True

    return _measure(args, report)


def _delay(args: argparse.Namespace) -> int:
    def report(out: Output, name: str, window: Window, summary: dict[str, Any]) -> bool:
        found = window.delays()
        if found is None:
            return False
        p50, p95, worst = found
        summary["delay_p50_ms"] = round(p50 * 1e3, 3)
        out.emit(
            f"{_label(args, name)}delay p50 {p50 * 1e3:.2f} ms  p95 {p95 * 1e3:.2f} ms  "
            f"max {worst * 1e3:.2f} ms  window {len(window.sent_ns)}",
            {
                "topic": name,
                "p50_ms": p50 * 1e3,
                "p95_ms": p95 * 1e3,
                "max_ms": worst * 1e3,
                "window": len(window.sent_ns),
            },
        )
        return True

    return _measure(args, report)


# -- pub ----------------------------------------------------------------------------------------
def _pub(args: argparse.Namespace) -> int:
    checked_name(args.topic)
    if (args.body is None) == (args.file is None):
        raise UsageError("give the body or --file, not both")
    body = read_text(args.file) if args.file is not None else args.body
    # ros2 topic pub: at a rate until Ctrl-C; --times bounds it. Without --rate: once.
    times = args.times if args.times is not None else (None if args.rate else 1)

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        summary["published"] = 0
        failures: list[str] = []

        def failed(event: TraceEvent) -> None:
            if event.kind in SEND_FAILURES:
                failures.append(event.detail)

        with open_system(args) as ctx:
            ctx.tracer.add_listener(failed)
            refuse_if_too_large(ctx, args.topic, body)
            publisher = ctx.publisher(args.topic)
            started = time.monotonic()
            i = 0
            # Ctrl-C as a flag, seen between two publishes: raised inside publish() it
            # could leave the engine half-way (a lock taken, not let go), and closing
            # the context then waited for ever (seen once: no end 30 s after Ctrl-C).
            with ctrl_c_sets() as pressed:
                while times is None or i < times:
                    if args.rate is not None:
                        # The publishing schedule itself, in slices that see Ctrl-C.
                        due = started + i / args.rate
                        while not pressed.is_set() and (left := due - time.monotonic()) > 0:
                            time.sleep(min(left, POLL_S))
                    if pressed.is_set():
                        break
                    message_id = publisher.publish(body)
                    i += 1
                    summary["published"] += 1
                    out.emit(
                        f"published {args.topic} {message_id}",
                        {"topic": args.topic, "message_id": message_id},
                    )
            if pressed.is_set():
                summary["interrupted"] = True
        # Closing the context handed every letter to the server or gave it up.
        if failures:
            summary["not_delivered"] = len(failures)
            note(
                f"mailbus topic pub: {len(failures)} of {summary['published']} not delivered: "
                f"{failures[0]}"
            )
            return ExitCode.FAILED
        return ExitCode.OK

    return run(args, work)


# -- list and info --------------------------------------------------------------------------------
def _list(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        counts: dict[str, int] = {}
        presence = Presence()

        def take(event: TraceEvent) -> None:
            if presence.take(event) or not is_message(event):
                return
            counts[event.name] = counts.get(event.name, 0) + 1

        with open_system(args, listen=True) as ctx:
            listen(traffic_of(ctx), deadline_after(args.seconds), take, summary)
        for name in presence.topics():
            counts.setdefault(name, 0)
        summary["topics"] = len(counts)
        for name in sorted(counts):
            human = f"{name}  {counts[name]}" if args.counts else name
            out.emit(human, {"topic": name, "count": counts[name]})
        if not counts and not summary.get("interrupted"):
            note(f"no topic seen within {args.seconds:g} s")
            return ExitCode.FAILED
        return ExitCode.OK

    return run(args, work)


def _info(args: argparse.Namespace) -> int:
    checked_name(args.topic)
    return entity_info(args, "topic", args.topic, ("publisher", "subscription"))

"""`mailbus service list|call|echo|info`: call a service by hand, and watch every call
paired with its response (the trace our peers' command lines do not have)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from mailbus import headers as H
from mailbus.context import Context
from mailbus.errors import ServiceTimeoutError
from mailbus.service_traces import ServiceTraces, Trace, TraceStatus
from mailbus.shell.completion import complete_names
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, note
from mailbus.shell.presence_view import Presence, entity_info
from mailbus.shell.session import (
    UsageError,
    checked_name,
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
from mailbus.shell.topic import matcher
from mailbus.trace import TraceEvent

EXAMPLES = {
    "list": "mailbus service list --seconds 5",
    "call": "mailbus service call demo/add '[1, 2, 3]' --timeout 3 --json\n"
    "  mailbus service call demo/add --file request.json   # or --file - (stdin)",
    "echo": "mailbus service echo 'demo/*'",
    "info": "mailbus service info demo/add",
}


def error_of(body: str | None) -> str | None:
    """The error an answer carries: a JSON object with an "error" member."""
    try:
        document = json.loads(body or "")
    except (ValueError, RecursionError):
        return None
    if isinstance(document, dict) and "error" in document:
        return str(document["error"])
    return None


def register(services: argparse._SubParsersAction[argparse.ArgumentParser], common: Any) -> None:
    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        return subcommand(services, common, name, help_text, EXAMPLES[name])

    seconds = positive(float, "seconds")
    listing = sub("list", "services known from announcements and traffic")
    listing.add_argument("--seconds", type=seconds, default=3.0, help="how long to listen (3)")
    listing.set_defaults(handler=usage_checked(_list))

    call = sub("call", "call a service and print its response (exit 1: timeout or error)")
    complete_names(call.add_argument("service"), "service")
    call.add_argument("body", nargs="?", help="the request body (or --file)")
    call.add_argument("--file", help="read the request body from this file ('-': stdin)")
    call.add_argument("--timeout", type=seconds, default=5.0, help="seconds to wait (5)")
    call.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for a server to announce the service (0: call at "
        "once; with --demo the demo's server is always waited for)",
    )
    call.set_defaults(handler=usage_checked(_call))

    echo = sub("echo", "each request with its response, latency and status")
    complete_names(echo.add_argument("service", help="a service or a glob"), "service")
    echo.add_argument("--timeout", type=seconds, default=5.0, help="unanswered after this (5)")
    echo.add_argument("--count", type=positive(int, "count"), help="stop after N calls")
    echo.add_argument("--seconds", type=seconds, help="stop after S seconds (exit 1: no call)")
    echo.set_defaults(handler=usage_checked(_echo))

    info = sub("info", "who serves and calls a service (from announcements)")
    complete_names(info.add_argument("service"), "service")
    info.add_argument("--seconds", type=seconds, default=3.0, help="how long to listen (3)")
    info.set_defaults(handler=usage_checked(_info))


def _call(args: argparse.Namespace) -> int:
    checked_name(args.service, "service")
    if (args.body is None) == (args.file is None):
        raise UsageError("give the request body or --file, not both")
    if not 0 <= args.wait < float("inf"):
        raise UsageError(f"--wait must be 0 or more seconds, not {args.wait}")
    body = read_text(args.file) if args.file is not None else args.body
    # The demo's server starts on a thread of this command: wait for it, or the call can
    # go before it exists (1 run in 20 had no response).
    wait = max(args.wait, args.timeout) if args.demo else args.wait

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        with open_system(args, listen=wait > 0) as ctx:
            if wait > 0 and not _server_announced(ctx, args.service, wait):
                summary["status"] = "no_server"
                note(
                    f"no server of {args.service} announced itself within {wait:g} s "
                    "(servers announce only with announce-period-s set)"
                )
                if args.json:
                    out.emit("", {"service": args.service, "status": "no_server"})
                return ExitCode.FAILED
            refuse_if_too_large(ctx, args.service, body)
            client = ctx.client(args.service)
            started = time.monotonic()
            try:
                response = client.call(body, args.timeout)
            except ServiceTimeoutError:
                summary["status"] = "timeout"
                note(
                    f"no response from {args.service} within {args.timeout:g} s "
                    f"(is a server running? `mailbus service list`)"
                )
                out.emit("", {"service": args.service, "status": "timeout"}) if args.json else None
                return ExitCode.FAILED
            latency_ms = (time.monotonic() - started) * 1e3
        error = error_of(response.body)
        summary.update(status="error" if error else "answered", latency_ms=round(latency_ms, 3))
        out.emit(
            response.body,
            {
                "service": args.service,
                "status": summary["status"],
                "response": response.body,
                "latency_ms": latency_ms,
            },
        )
        if error is not None:
            note(f"{args.service} answered with an error: {error}")
            return ExitCode.FAILED
        return ExitCode.OK

    return run(args, work)


def _server_announced(ctx: Context, service: str, seconds: float) -> bool:
    """Whether a participant announces a server of `service` within `seconds`. Its
    announcement comes after its receiver is connected, so a request sent then is read
    (a mail receiver that starts at UIDNEXT never sees what came before it)."""
    presence = Presence()
    traffic = traffic_of(ctx)
    deadline = deadline_after(seconds)
    while True:
        # A server of this context itself (the demo's, with --demo) needs no announcement.
        if any(server.service == service for server in ctx.servers):
            return True
        event = traffic.next(min(deadline or float("inf"), time.monotonic() + 0.05))
        if event is not None and presence.take(event) and presence.holders("server", service):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


class _Echoed(ServiceTraces):
    """The engine's pairing, printing each call once: when answered, and a call that
    timed out, a duplicate answer or a response whose request never came, after
    --timeout."""

    def __init__(self, timeout_s: float, show: Callable[[Trace, str], None]) -> None:
        super().__init__(timeout_s=timeout_s)
        self._show = show
        self._shown: set[str] = set()

    def _answered(self, trace: Trace) -> None:
        self._shown.add(trace.key)
        assert trace.response is not None
        status = "error" if error_of(trace.response.body) is not None else "answered"
        self._show(trace, "late" if trace.late else status)

    def show_overdue(self, now_s: float) -> None:
        for trace in self.traces():
            if trace.key in self._shown or now_s - trace.started_s < self.timeout_s:
                continue
            status = trace.status(now_s, self.timeout_s)
            if status in (TraceStatus.TIMED_OUT, TraceStatus.ORPHANED, TraceStatus.DUPLICATE):
                self._shown.add(trace.key)
                self._show(trace, str(status))


def _echo(args: argparse.Namespace) -> int:
    checked_name(args.service, "service (or glob)")
    wanted = matcher(args.service)

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        summary.update(calls=0, answered=0, timed_out=0, orphaned=0)

        def show(trace: Trace, status: str) -> None:
            request, response = trace.request, trace.response
            latency = None if trace.latency_s is None else round(trace.latency_s * 1000, 3)
            shown = f"{latency:.1f} ms" if latency is not None else "-"
            out.emit(
                f"{out.bold(trace.service)}  {status}  {shown}  "
                f"{(request.body if request else '?')} -> {(response.body if response else '?')}",
                {
                    "service": trace.service,
                    "status": status,
                    "latency_ms": latency,
                    "request": request.body if request else None,
                    "response": response.body if response else None,
                    "request_id": request.message_id
                    if request
                    else response and response.in_reply_to,
                },
            )
            summary["calls"] += 1
            counted = {"error": "answered", "late": "answered", "timed out": "timed_out"}
            name = counted.get(status, status)
            if name in summary:
                summary[name] += 1

        traces = _Echoed(args.timeout, show)
        last_scan = time.monotonic()
        with open_system(args, listen=True) as ctx:
            traffic = traffic_of(ctx)
            deadline = deadline_after(args.seconds)
            while args.count is None or summary["calls"] < args.count:
                event = traffic.next(min(deadline or float("inf"), time.monotonic() + 0.5))
                now = time.monotonic()
                if event is not None and wanted(event.name):
                    traces.add(event)
                if now - last_scan >= 0.5:
                    last_scan = now
                    traces.show_overdue(time.time())
                if deadline is not None and now >= deadline:
                    break
        if not summary["calls"]:
            note(f"no call of {args.service} within {args.seconds:g} s")
            return ExitCode.FAILED
        return ExitCode.OK

    return run(args, work)


def _list(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        presence = Presence()
        seen: set[str] = set()

        def take(event: TraceEvent) -> None:
            if not presence.take(event) and H.CLIENT_GID in event.headers:
                seen.add(event.name)

        with open_system(args, listen=True) as ctx:
            listen(traffic_of(ctx), deadline_after(args.seconds), take, summary)
        names = sorted(seen | presence.services())
        summary["services"] = len(names)
        for name in names:
            out.emit(name, {"service": name})
        if not names and not summary.get("interrupted"):
            note(f"no service seen within {args.seconds:g} s")
            return ExitCode.FAILED
        return ExitCode.OK

    return run(args, work)


def _info(args: argparse.Namespace) -> int:
    checked_name(args.service, "service")
    return entity_info(args, "service", args.service, ("server", "client"))

"""`mailbus service list|call|echo|info`: call a service by hand, and watch every call
paired with its response (the trace our peers' command lines do not have)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any

from mailbus import headers as H
from mailbus.errors import ServiceTimeoutError
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output, note
from mailbus.shell.presence_view import Presence
from mailbus.shell.session import Traffic, deadline_after, open_system, run, usage_checked
from mailbus.shell.topic import matcher
from mailbus.trace import TraceEvent

EXAMPLES = {
    "list": "mailbus service list --seconds 5",
    "call": 'mailbus service call demo/add \'{"a": 1, "b": 2}\' --timeout 3 --json',
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
        parser = services.add_parser(
            name,
            help=help_text,
            parents=[common],
            epilog=f"example:\n  {EXAMPLES[name]}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(action=name)
        return parser

    listing = sub("list", "services known from announcements and traffic")
    listing.add_argument("--seconds", type=float, default=3.0, help="how long to listen (3)")
    listing.set_defaults(handler=usage_checked(_list))

    call = sub("call", "call a service and print its response (exit 1: timeout or error)")
    call.add_argument("service")
    call.add_argument("body")
    call.add_argument("--timeout", type=float, default=5.0, help="seconds to wait (5)")
    call.set_defaults(handler=usage_checked(_call))

    echo = sub("echo", "each request with its response, latency and status")
    echo.add_argument("service", help="a service or a glob")
    echo.add_argument("--timeout", type=float, default=5.0, help="unanswered after this (5)")
    echo.add_argument("--count", type=int, help="stop after N calls")
    echo.add_argument("--seconds", type=float, help="stop after S seconds")
    echo.set_defaults(handler=usage_checked(_echo))

    info = sub("info", "who serves and calls a service (from announcements)")
    info.add_argument("service")
    info.add_argument("--seconds", type=float, default=3.0, help="how long to listen (3)")
    info.set_defaults(handler=usage_checked(_info))


def _call(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        with open_system(args) as ctx:
            client = ctx.client(args.service)
            started = time.monotonic()
            try:
                response = client.call(args.body, args.timeout)
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


@dataclass
class _Pending:
    request: TraceEvent
    seen: float


def _echo(args: argparse.Namespace) -> int:
    wanted = matcher(args.service)

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        pending: dict[str, _Pending] = {}
        summary.update(calls=0, answered=0, timed_out=0, orphaned=0)

        def show(request: TraceEvent | None, response: TraceEvent | None, status: str) -> None:
            either = request or response
            assert either is not None
            latency = None
            if request is not None and response is not None:
                latency = (response.reception_timestamp_ns - request.source_timestamp_ns) / 1e6
            shown = f"{latency:.1f} ms" if latency is not None else "-"
            out.emit(
                f"{out.bold(either.name)}  {status}  {shown}  "
                f"{(request.body if request else '?')} -> {(response.body if response else '?')}",
                {
                    "service": either.name,
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

        with open_system(args) as ctx:
            traffic = Traffic(ctx)
            deadline = deadline_after(args.seconds)
            while args.count is None or summary["calls"] < args.count:
                event = traffic.next(min(deadline or float("inf"), time.monotonic() + 0.5))
                now = time.monotonic()
                for key, waiting in list(pending.items()):
                    if now - waiting.seen > args.timeout:
                        del pending[key]
                        summary["timed_out"] += 1
                        show(waiting.request, None, "timed out")
                if event is not None and wanted(event.name) and H.CLIENT_GID in event.headers:
                    if not event.in_reply_to:
                        pending[event.message_id] = _Pending(event, now)
                    else:
                        found = pending.pop(event.in_reply_to, None)
                        status = "answered" if found else "orphaned"
                        if found is not None and error_of(event.body) is not None:
                            status = "error"
                        summary["answered" if found else "orphaned"] += 1
                        show(found.request if found else None, event, status)
                if deadline is not None and now >= deadline:
                    break
        return ExitCode.OK

    return run(args, work)


def _list(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        presence = Presence()
        seen: set[str] = set()
        with open_system(args) as ctx:
            traffic = Traffic(ctx)
            deadline = deadline_after(args.seconds)
            while (event := traffic.next(deadline)) is not None:
                if not presence.take(event) and H.CLIENT_GID in event.headers:
                    seen.add(event.name)
        names = sorted(seen | presence.services())
        summary["services"] = len(names)
        for name in names:
            out.emit(name, {"service": name})
        return ExitCode.OK

    return run(args, work)


def _info(args: argparse.Namespace) -> int:
    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        presence = Presence()
        with open_system(args) as ctx:
            traffic = Traffic(ctx)
            deadline = deadline_after(args.seconds)
            while (event := traffic.next(deadline)) is not None:
                presence.take(event)
        servers = presence.holders("server", args.service)
        clients = presence.holders("client", args.service)
        summary.update(servers=len(servers), clients=len(clients))
        out.emit(
            f"Service: {args.service}\nServer count: {len(servers)}\n"
            + "".join(f"  {s}\n" for s in servers)
            + f"Client count: {len(clients)}"
            + "".join(f"\n  {c}" for c in clients),
            {"service": args.service, "servers": servers, "clients": clients},
        )
        return ExitCode.OK

    return run(args, work)

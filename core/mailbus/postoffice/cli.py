"""`mailbus postoffice serve` (the daemon) and `mailbus postoffice boxes` (list them)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mailbus.postoffice.lifecycle import DEFAULT_EXPIRE_IDLE_S, WHEN_FULL
from mailbus.postoffice.paths import default_store
from mailbus.postoffice.protocol import DEFAULT_PORT

if TYPE_CHECKING:  # the daemon's modules load only when a subcommand runs
    from mailbus.postoffice.config import ServerConfig
    from mailbus.trace import TraceEvent, Tracer


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("postoffice", help="the PostOffice mailbox daemon")
    sub = parser.add_subparsers(dest="postoffice_command", metavar="ACTION", required=True)
    serve = sub.add_parser("serve", help="run the daemon (loopback, port 8228 by default)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    serve.add_argument("--store", type=Path, default=None, help="SQLite file of the mailboxes")
    serve.add_argument("--sync", choices=("full", "normal"), default="full")
    serve.add_argument("--comm-timeout", type=float, default=10.0, metavar="SECONDS")
    serve.add_argument("--max-letter-bytes", type=int, default=16 * 1024 * 1024)
    serve.add_argument("--max-connections", type=int, default=256)
    serve.add_argument("--max-boxes-per-connection", type=int, default=64)
    serve.add_argument("--max-letters-per-box", type=int, default=100_000)
    serve.add_argument(
        "--when-full",
        choices=WHEN_FULL,
        default="drop-oldest",
        help="at --max-letters-per-box: drop the oldest letters (default) or refuse new ones",
    )
    serve.add_argument(
        "--expire-idle",
        type=float,
        default=DEFAULT_EXPIRE_IDLE_S,
        metavar="SECONDS",
        help="remove boxes nobody checked out for this long (default a day; 0: never)",
    )
    serve.add_argument(
        "--reserve-mb",
        type=float,
        default=32.0,
        metavar="MB",
        help="refuse letters while the store's disk has less free than this (default 32)",
    )
    serve.add_argument("--hash-cost", type=int, default=14, help="scrypt log2(N)")
    serve.add_argument("--tls-cert", type=Path, default=None, help="serve TLS: certificate (PEM)")
    serve.add_argument("--tls-key", type=Path, default=None, help="its private key (PEM)")
    serve.add_argument(
        "--tls-client-ca",
        type=Path,
        default=None,
        help="mutual TLS: clients must show a certificate signed by this CA",
    )
    serve.add_argument(
        "--allow-plain-remote",
        action="store_true",
        help="take plain connections from other hosts too (their password digests "
        "cross the network readable: see docs/postoffice.md)",
    )
    serve.add_argument(
        "--trace-log", type=Path, default=None, help="append trace events as JSON lines"
    )
    serve.add_argument("--verbose", "-v", action="store_true")
    serve.set_defaults(handler=run_serve)
    boxes = sub.add_parser("boxes", help="list mailboxes with their letter counts")
    boxes.add_argument("--store", type=Path, default=None)
    boxes.add_argument("--empty", metavar="BOX", help="delete the letters of this box")
    boxes.add_argument("--remove", metavar="BOX", help="remove this box and its letters")
    boxes.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    boxes.set_defaults(handler=run_boxes)
    box = sub.add_parser("box", help="show, empty or remove one mailbox")
    box.add_argument("name", metavar="BOX")
    box.add_argument("--store", type=Path, default=None)
    action = box.add_mutually_exclusive_group(required=True)
    action.add_argument("--show", action="store_true", help="list the letters waiting")
    action.add_argument("--empty", action="store_true", help="delete its letters")
    action.add_argument("--remove", action="store_true", help="remove it and its letters")
    box.add_argument("--limit", type=int, default=20, help="letters --show lists (max 1000)")
    box.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    box.set_defaults(handler=run_box)


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    from mailbus.postoffice.config import ServerConfig
    from mailbus.postoffice.store import HashParams

    return ServerConfig(
        store_path=args.store or default_store(),
        host=args.host,
        port=args.port,
        sync=args.sync,
        comm_timeout_s=args.comm_timeout,
        max_letter_bytes=args.max_letter_bytes,
        max_connections=args.max_connections,
        max_boxes_per_connection=args.max_boxes_per_connection,
        max_letters_per_box=args.max_letters_per_box,
        when_full=args.when_full,
        expire_idle_s=args.expire_idle,
        hash_params=HashParams(log2_n=args.hash_cost),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        allow_plain_remote=args.allow_plain_remote,
        store_reserve_bytes=max(0, round(args.reserve_mb * 1024 * 1024)),
    )


def run_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from mailbus.errors import ConfigError
    from mailbus.postoffice.store import StoreError

    config = config_from_args(args)
    if (config.tls_key or config.tls_client_ca) and config.tls_cert is None:
        print("error: --tls-key and --tls-client-ca need --tls-cert", file=sys.stderr)
        return 2
    with contextlib.suppress(ValueError):
        if not ipaddress.ip_address(config.host).is_loopback and config.tls_cert is None:
            refused = "taken" if config.allow_plain_remote else "refused (use --tls-cert)"
            print(
                f"warning: listening on {config.host} without TLS: plain connections from "
                f"other hosts are {refused}",
                file=sys.stderr,
            )
    try:
        asyncio.run(_serve(config, args.trace_log))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # Everything that touches the store's files says so itself (StoreError): what
        # is left is the listening socket.
        print(f"error: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        return 1
    return 0


def _trace_to_file(path: Path) -> tuple[Tracer, Any]:
    """A tracer that appends each event as one JSON line (for the workbench to tail)."""
    from mailbus.trace import Tracer

    tracer = Tracer()
    stream = path.open("a", encoding="utf-8")

    def write(event: TraceEvent) -> None:
        record = {
            "kind": event.kind,
            "time_ns": event.time_ns,
            "name": event.name,
            "size": event.size,
            "detail": event.detail,
            "extra": dict(event.extra),
        }
        stream.write(json.dumps(record, default=str) + "\n")
        stream.flush()

    tracer.add_listener(write)
    return tracer, stream


async def _serve(config: ServerConfig, trace_log: Path | None = None) -> None:
    from mailbus.postoffice.office import PostOffice

    tracer, stream = _trace_to_file(trace_log) if trace_log else (None, None)
    office = PostOffice(config, tracer)
    await office.start()
    # One line on stdout, so that a parent process learns the port when it asked for 0.
    print(f"postoffice listening on {config.host}:{office.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await office.stop()
        if stream is not None:
            stream.close()


def run_boxes(args: argparse.Namespace) -> int:
    if args.empty and args.remove:
        print("error: --empty and --remove are separate commands", file=sys.stderr)
        return 2
    if args.empty or args.remove:
        op = "empty" if args.empty else "remove"
        return _change(args.store or default_store(), args.empty or args.remove, op, args.yes)
    from mailbus.postoffice.admin import AdminError, list_boxes, store_info

    try:
        boxes = list_boxes(args.store or default_store())
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows: list[tuple[str, ...]] = [("MAILBOX", "LETTERS", "BYTES", "DROPPED", "STATE")]
    for b in boxes:
        state = "-" if not b.live else (f"held by {b.holder}" if b.holder else _idle(b.idle_s))
        rows.append((b.name, str(b.letters), str(b.payload_bytes), str(b.dropped), state))
    width = max(len(r[0]) for r in rows)
    for name, letters, size, dropped, state in rows:
        print(f"{name:<{width}}  {letters:>8}  {size:>10}  {dropped:>8}  {state}")
    if boxes and not any(b.live for b in boxes):
        print("(no daemon answers for this store: DROPPED and STATE unknown)")
    try:
        info = store_info(args.store or default_store())
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    database, wal = info.database_bytes, info.wal_bytes
    print(f"store: {_mb(database + wal)} on disk ({_mb(database)} database, {_mb(wal)} WAL)")
    if info.full:
        print("store full: its disk is down to the reserve, letters are refused (DELFAIL)")
    return 0


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _idle(seconds: float | None) -> str:
    if seconds is None:
        return "idle"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"idle {seconds / size:.1f} {unit}"
    return f"idle {seconds:.0f} s"


def run_box(args: argparse.Namespace) -> int:
    store = args.store or default_store()
    if args.empty or args.remove:
        return _change(store, args.name, "empty" if args.empty else "remove", args.yes)
    from mailbus.postoffice.admin import AdminError, show_letters

    try:
        letters = show_letters(store, args.name, args.limit)
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    from datetime import UTC, datetime

    for letter in letters:
        when = datetime.fromtimestamp(letter.received_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")
        subject = letter.subject or "(not an email)"
        print(f"{letter.letter_id:>10}  {when}  {letter.sender:<24}  {letter.size:>8}  {subject}")
    print(f"{len(letters)} letters shown (oldest first, at most {min(args.limit, 1000)})")
    return 0


def _change(store: Path, name: str, op: str, yes: bool) -> int:
    from mailbus.postoffice.admin import AdminError, empty_box, remove_box

    if not yes:
        if not sys.stdin.isatty():
            print(
                f"error: refusing to {op} {name!r} without --yes (nothing to ask)", file=sys.stderr
            )
            return 1
        what = "delete every letter of" if op == "empty" else "remove"
        answer = input(f"{what} mailbox {name!r}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing done")
            return 1
    try:
        count = (empty_box if op == "empty" else remove_box)(store, name)
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    done = "emptied" if op == "empty" else "removed"
    print(f"{done} {name} ({count} letters deleted)")
    return 0

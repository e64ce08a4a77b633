"""`mailbus foxglove`: serve a running system (or the demo, or a recorded session) to
Foxglove and Lichtblick over the Foxglove WebSocket protocol."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType

EPILOG = """examples:
  mailbus foxglove --demo                     then open ws://127.0.0.1:8765
  mailbus --config lab.toml foxglove --allow-calls --allow-publish
  mailbus foxglove --session sessions/run1 --rate 2 --paused
The protocol has no authentication: keep the loopback default and use an SSH tunnel
(ssh -L 8765:127.0.0.1:8765 robot) rather than --host 0.0.0.0. See docs/foxglove.md."""


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {text}")
    return value


def _queue(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "foxglove",
        help="serve the system to Foxglove / Lichtblick (Foxglove WebSocket protocol)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config", metavar="FILE.toml", default=argparse.SUPPRESS, help="the system's options"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--demo", action="store_true", help="serve the built-in demo system")
    source.add_argument("--session", metavar="DIR", help="play a recorded session out")
    parser.add_argument("--speed", type=_positive, default=1.0, help="--demo: speed (1)")
    parser.add_argument("--rate", type=_positive, default=1.0, help="--session: speed (1)")
    parser.add_argument("--loop", action="store_true", help="--session: start again at the end")
    parser.add_argument(
        "--paused", action="store_true", help="--session: wait for the resume service"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8765, help="port (8765; 0: any free)")
    parser.add_argument(
        "--allow-calls", action="store_true", help="let clients call Mailbus services"
    )
    parser.add_argument(
        "--allow-publish", action="store_true", help="let clients publish to Mailbus topics"
    )
    parser.add_argument(
        "--send-queue",
        type=_queue,
        default=None,
        metavar="N",
        help="frames a client may fall behind before it is cut off (4096)",
    )
    parser.add_argument("--seconds", type=_positive, help="stop after S seconds")
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from mailbus.foxglove.served import ServedSystem, exposure_warning
    from mailbus.foxglove.server import SEND_QUEUE

    def note(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.session is None and (args.loop or args.paused or args.rate != 1.0):
        note("mailbus foxglove: --rate, --loop and --paused go with --session")
        return 2
    if not args.demo and args.speed != 1.0:
        note("mailbus foxglove: --speed goes with --demo")
        return 2
    config = getattr(args, "config", None)
    served = ServedSystem(
        config=config,
        demo=args.demo,
        speed=args.speed,
        session=args.session,
        rate=args.rate,
        loop=args.loop,
        paused=args.paused,
        host=args.host,
        port=args.port,
        allow_calls=args.allow_calls,
        allow_publish=args.allow_publish,
        send_queue=args.send_queue or SEND_QUEUE,
        notes=note,
    )
    warning = exposure_warning(args.host, args.port, args.allow_calls, args.allow_publish)
    if warning is not None:
        note(f"mailbus foxglove: warning: {warning}")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    try:
        with served:
            print(
                f"mailbus foxglove: serving {served.url} (Foxglove or Lichtblick: Open connection"
                " → Foxglove WebSocket)",
                flush=True,
            )
            try:
                while not stop.wait(0.5):  # bounded so that Ctrl-C is seen promptly
                    if args.seconds is not None and time.monotonic() - started >= args.seconds:
                        break
            except KeyboardInterrupt:
                pass
            stats = dict(served.server.stats)
    finally:
        signal.signal(signal.SIGTERM, previous)
    note(
        f"mailbus foxglove: stopped; {stats['connected']} client(s) served, "
        f"{stats['cut_off']} cut off for being slow, {stats['calls']} call(s), "
        f"{stats['published']} publish(es)"
    )
    return 0

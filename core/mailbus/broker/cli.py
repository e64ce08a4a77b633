"""`mailbus gateway run FILE.json` and `mailbus gateway check FILE.json`."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from mailbus.broker.errors import BrokerError, GatewayConfigError
from mailbus.broker.gateway import Gateway, load_gateway_file, resolve_factory
from mailbus.broker.snapshot import ModuleStats
from mailbus.errors import MailbusError


def _summary(modules: Sequence[ModuleStats]) -> str:
    lines = [f"{'module':<20} {'queued':>7} {'delivered':>10} {'dropped':>8} {'failed':>7}"]
    for m in modules:
        lines.append(
            f"{m.name:<20} {m.queue_depth:>7} {m.delivered:>10} {m.dropped:>8} {m.failed:>7}"
        )
    return "\n".join(lines)


def _check(args: argparse.Namespace) -> int:
    try:
        spec = load_gateway_file(args.file)
        for index, module in enumerate(spec.modules):
            resolve_factory(module, f"modules[{index}].loader")
    except GatewayConfigError as exc:
        print(f"mailbus gateway: {exc}", file=sys.stderr)
        return 2
    print(f"{args.file}: {len(spec.modules)} modules, {len(spec.links)} links, OK")
    return 0


def _run(args: argparse.Namespace) -> int:
    from mailbus.context import Context
    from mailbus.options import load_options

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        spec = load_gateway_file(args.file)
        options = load_options(args.config)
    except (GatewayConfigError, MailbusError) as exc:
        print(f"mailbus gateway: {exc}", file=sys.stderr)
        return 2
    with Context(options) as context:
        gateway = Gateway(spec, tracer=context.tracer, context=context)
        try:
            gateway.start()
        except GatewayConfigError as exc:
            print(f"mailbus gateway: {exc}", file=sys.stderr)
            return 2
        except BrokerError as exc:
            print(f"mailbus gateway: {exc}", file=sys.stderr)
            return 1
        names = ", ".join(m.name for m in spec.modules)
        print(f"mailbus gateway: running {names}", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            while not stop.is_set():
                remaining = (
                    None if args.seconds is None else args.seconds - (time.monotonic() - started)
                )
                if remaining is not None and remaining <= 0:
                    break
                # Waiting on the event is the run's own pace (stats period), not a sync.
                period = args.stats_every or 3600.0
                stop.wait(period if remaining is None else min(period, remaining))
                if args.stats_every and not stop.is_set():
                    print(_summary(gateway.snapshot().modules), file=sys.stderr, flush=True)
        finally:
            final = gateway.close()
    print(_summary(final), file=sys.stderr, flush=True)
    return 0


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (inf would overflow a wait, nan never ends)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("gateway", help="run a broker gateway described by a JSON file")
    actions = parser.add_subparsers(dest="gateway_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="build the gateway and run it until Ctrl-C or SIGTERM")
    run.add_argument("file", metavar="FILE.json")
    run.add_argument("--seconds", type=_seconds, default=None, help="stop after N seconds")
    run.add_argument(
        "--stats-every",
        type=_seconds,
        default=None,
        metavar="S",
        help="print queue stats every S s",
    )
    run.set_defaults(handler=_run)
    check = actions.add_parser("check", help="validate the file and find every module's factory")
    check.add_argument("file", metavar="FILE.json")
    check.set_defaults(handler=_check)

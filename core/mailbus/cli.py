"""The `mailbus` command (`python -m mailbus`): the engine's subcommands, and the
workbench's.

Each part of the engine registers its subcommands through a `register(subparsers)`
function in its own module, listed in COMMAND_MODULES. The workbench's (opening it, the
default; `serve`; `open`) come from `mailbus_workbench.cli`, named here rather than
imported so that the engine never depends on it: that module imports no terminal library,
so the engine's subcommands work in a bare install (`pip install mailbus`), and the
workbench's say which extra to install (`pip install 'mailbus[workbench]'`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mailbus.errors import MailbusError
from mailbus.extras import missing_extra

COMMAND_MODULES = (
    "mailbus.demo",
    "mailbus.outbox.cli",
    "mailbus.broker.cli",
    "mailbus.postoffice.cli",
    "mailbus.mail.check",
    "mailbus.mail.sieve_cli",
    "mailbus.mail.relay.cli",
    "mailbus.stem.cli",
    "mailbus.sessions.cli",
    "mailbus.sessions.mcap_cli",
    "mailbus.foxglove.cli",
    "mailbus.signing.cli",
    "mailbus.shell.cli",
    "mailbus.testing.cli",
    "mailbus.shell.completion",
)
WORKBENCH_COMMANDS = "mailbus_workbench.cli"


def build_parser(
    prog: str = "mailbus",
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog=prog, description="Messaging carried in emails.")
    parser.add_argument("--config", metavar="FILE.toml", help="options file (see README)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser, sub


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except MailbusError as exc:
        # A bad option or an unreachable server is the user's to fix: no traceback.
        print(f"mailbus: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        # So is an extra that is not installed; any other missing module is a bug.
        what = f"`mailbus {args.command}`" if args.command else "the workbench"
        told = missing_extra(exc, what)
        if told is None:
            raise
        print(f"mailbus: {told}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from mailbus.shell.completion import parse_args

        parser, sub = build_parser()
        importlib.import_module(WORKBENCH_COMMANDS).register(parser, sub)
        args = parse_args(parser, argv)
        return run(args, parser)
    except KeyboardInterrupt:
        # Ctrl-C while the command was still starting (loading, connecting): one line.
        print("mailbus: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

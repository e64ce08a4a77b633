"""The `mailbus` command line of the engine (headless).

The workbench package builds the full `mailbus` command on top of this parser, adding
its own subcommands; `python -m mailbus` runs this one alone, without textual.
Each part of the engine registers its subcommands through a `register(subparsers)`
function in its own module, listed in COMMAND_MODULES.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mailbus.errors import MailbusError

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
    "mailbus.signing.cli",
    "mailbus.shell.cli",
    "mailbus.shell.completion",
)


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


def main(argv: Sequence[str] | None = None) -> int:
    from mailbus.shell.completion import parse_args

    parser, _ = build_parser()
    args = parse_args(parser, argv)
    return run(args, parser)


if __name__ == "__main__":
    sys.exit(main())

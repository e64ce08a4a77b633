"""The `mailbus` command: the engine's subcommands plus the workbench's."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mailbus.cli import build_parser, run
from mailbus.shell.completion import parse_args

from mailbus_workbench import serve


def _workbench(args: argparse.Namespace) -> int:
    from mailbus_workbench.app import run_app

    return run_app(config=args.config, viewer=args.viewer)


def _open(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mailbus_workbench.app import run_app

    if not Path(args.session).is_dir():
        print(f"mailbus open: no session directory {args.session}", file=sys.stderr)
        return 2
    return run_app(config=args.config, session=args.session)


def main(argv: Sequence[str] | None = None) -> int:
    parser, sub = build_parser()
    parser.set_defaults(handler=_workbench)
    parser.add_argument(
        "--viewer",
        action="store_true",
        help="one of several workbenches on one system: a PostOffice box of its own "
        "(what `mailbus serve` runs per browser tab)",
    )
    serve.register(sub)
    opener = sub.add_parser("open", help="open a recorded session in the workbench")
    opener.add_argument("session", help="session directory (see `mailbus record`)")
    opener.set_defaults(handler=_open)
    args = parse_args(parser, argv)
    return run(args, parser)


if __name__ == "__main__":
    sys.exit(main())

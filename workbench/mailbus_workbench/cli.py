"""The workbench's part of the `mailbus` command (mailbus.cli): opening the workbench
(the default, with no subcommand), `serve` and `open`.

Imports no terminal library itself: the engine's command registers these in a bare
install too, and running one without the `workbench` extra says which extra to install."""

from __future__ import annotations

import argparse
import sys

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


def register(
    parser: argparse.ArgumentParser,
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
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

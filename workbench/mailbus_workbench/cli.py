"""The workbench's part of the `mailbus` command (mailbus.cli): opening the workbench
(the default, with no subcommand), `serve`, `open` and `notebook`.

Imports no terminal library itself: the engine's command registers these in a bare
install too, and running one without the `workbench` extra says which extra to install."""

from __future__ import annotations

import argparse
import sys

from mailbus_workbench import serve


def _workbench(args: argparse.Namespace) -> int:
    from mailbus_workbench.launch import run_app

    return run_app(config=args.config, viewer=args.viewer, layout=args.layout)


def _open(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mailbus_workbench.launch import run_app

    if not args.session.strip():  # Path("") is ".": the working directory, not a session
        print("mailbus open: give a session directory or an .mcap file", file=sys.stderr)
        return 2
    path = Path(args.session)
    if path.is_dir():  # the app says what is wrong with a bad session directory
        return run_app(config=args.config, session=args.session)
    if not path.exists():
        print(f"mailbus open: no session directory {args.session}", file=sys.stderr)
        return 2
    # A file: an MCAP recording, converted (once, with progress on the terminal) before
    # the app takes the terminal over; a bad one is one line here.
    from mailbus.sessions.reader import SessionError, open_session

    try:
        open_session(path)
    except SessionError as exc:
        print(f"mailbus open: {exc}", file=sys.stderr)
        return 2
    return run_app(config=args.config, session=args.session)


def _notebook(args: argparse.Namespace) -> int:
    from mailbus.notebook.launch import run_notebook

    extra = ["--no-browser"] if args.no_browser else []
    if args.allow_root:
        extra.append("--allow-root")
    if args.port is not None:
        extra.append(f"--port={args.port}")
    return run_notebook(args.config, args.dir, extra)


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
    parser.add_argument(
        "--layout",
        metavar="NAME",
        help="open the workbench on a saved layout (the palette's 'Save layout as…'); "
        "without it, the layout this config had at the last quit",
    )
    serve.register(sub)
    opener = sub.add_parser("open", help="open a recorded session in the workbench")
    opener.add_argument("session", help="session directory (see `mailbus record`) or MCAP file")
    opener.set_defaults(handler=_open)
    notebook = sub.add_parser(
        "notebook",
        help="open JupyterLab on a live notebook attached to the demo or --config's system "
        "(pip install 'mailbus[notebook]')",
    )
    # Also after the command (`mailbus notebook --config FILE`); SUPPRESS keeps the
    # top-level one when it is not given here.
    notebook.add_argument(
        "--config", metavar="FILE.toml", default=argparse.SUPPRESS, help="options file"
    )
    notebook.add_argument("--dir", default=".", help="where the notebook is written")
    notebook.add_argument("--port", type=int, default=None, help="JupyterLab's port")
    notebook.add_argument("--no-browser", action="store_true", help="do not open a browser")
    notebook.add_argument(
        "--allow-root",
        action="store_true",
        help="let JupyterLab run as root (given by itself when run as root)",
    )
    notebook.set_defaults(handler=_notebook)

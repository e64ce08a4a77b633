"""`mailbus mail-relay`: the host relay for the participants of this host that set
`[mail] share = "relay"` (docs/mail.md, "Sharing one receiver on a host").

    mailbus --config robot.toml mail-relay [--state-dir DIR] [--socket PATH]

It prints `mail-relay listening on PATH` once participants may connect, stops on
SIGTERM/SIGINT (participants then wait for it, retrying with back-off) and prints one
JSON line of its counters on the way out.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `mailbus --help` does not load imapclient.
    from mailbus.errors import ConfigError
    from mailbus.mail.relay.config import check_socket_path, socket_path, state_dir_default
    from mailbus.mail.relay.server import MailRelay
    from mailbus.mail.transport import mail_section
    from mailbus.options import load_options

    options = load_options(args.config)
    if options.transport != "email":
        raise ConfigError("transport", 'the mail relay reads an account: set transport = "email"')
    section = mail_section(options)
    path = (
        check_socket_path("--socket", args.socket) if args.socket else socket_path(options, section)
    )
    if args.queue_bytes is not None and args.queue_bytes < 1024:
        raise ConfigError("--queue-bytes", "must be >= 1024")
    state_dir = Path(args.state_dir) if args.state_dir else state_dir_default()
    if args.verbose:
        logging.basicConfig(level=logging.INFO)
    relay = MailRelay(options, section, path, state_dir, queue_bytes=args.queue_bytes)

    def ready() -> None:
        print(f"mail-relay listening on {path}", flush=True)

    relay.run(ready)
    print(json.dumps({"counters": dict(relay.counters)}), flush=True)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "mail-relay",
        help="read the account's inbox once for every participant of this host",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where the relay keeps its position (default $XDG_STATE_HOME/mailbus)",
    )
    parser.add_argument(
        "--socket", metavar="PATH", help="the Unix socket (default: [mail] relay-socket)"
    )
    parser.add_argument(
        "--queue-bytes",
        type=int,
        default=None,
        help="unsent bytes a participant may fall behind before it is cut off "
        "(default [mail] relay-queue-bytes, 16 MiB)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    parser.set_defaults(handler=_run)

"""`mailbus mail-check`: try the email options against the real servers.

Connects to both servers (TLS verified, login), prints what the receiver found and,
with `--round-trip`, publishes one message to the configured recipients and waits for
it to come back through the inbox, printing how long that took. Exit code 0 when all
went well, 1 with a one-line reason otherwise. The password is never printed.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid


def _run(args: argparse.Namespace) -> int:
    # Imported here so that `mailbus --help` does not load pycurl and imapclient.
    from mailbus.context import Context
    from mailbus.errors import MailbusError
    from mailbus.mail.imap_receiver import ImapReceiver
    from mailbus.mail.routed_receiver import RoutedImapReceiver
    from mailbus.mail.shared_receiver import SharedReceiverHandle
    from mailbus.options import load_options
    from mailbus.waitset import wait_for_message

    try:
        options = load_options(args.config)
        if options.transport != "email":
            print(f"transport is {options.transport!r}, not 'email': nothing to check")
            return 1
        with Context(options) as ctx:
            receiver = ctx.transport.receiver
            if isinstance(receiver, SharedReceiverHandle):
                receiver = receiver.imap  # share = "process": the process's receiver
            assert isinstance(receiver, ImapReceiver)
            print(f"SMTP {options.url_smtp}: login as {options.username} OK")
            if isinstance(receiver, RoutedImapReceiver):
                routes = receiver.routes
                print(
                    f"IMAP {options.url_imap}: login OK, routed mode: "
                    f"{len(routes.topics)} topics, {len(routes.services)} services routed"
                )
            else:
                print(
                    f"IMAP {options.url_imap}: login OK, mailbox {receiver.settings.mailbox}, "
                    f"next UID {receiver.cursor.next_uid}"
                )
            if not args.round_trip:
                return 0
            topic = f"mailbus-check-{uuid.uuid4().hex[:8]}"
            sub = ctx.subscription(topic)
            start = time.perf_counter()
            ctx.publisher(topic).publish("round trip")
            message = wait_for_message(sub, args.timeout)
            if message is None:
                print(
                    f"round trip: nothing came back within {args.timeout:.0f} s "
                    f"(do the recipients {options.recipients.to} deliver to this inbox?)"
                )
                return 1
            print(f"round trip: {1000 * (time.perf_counter() - start):.0f} ms")
            return 0
    except MailbusError as exc:
        print(f"mail-check failed: {exc}", file=sys.stderr)
        return 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "mail-check", help="log in to the configured SMTP and IMAP servers and report"
    )
    parser.add_argument(
        "--round-trip", action="store_true", help="also send one message and wait for it"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="round-trip wait (s)")
    parser.set_defaults(handler=_run)

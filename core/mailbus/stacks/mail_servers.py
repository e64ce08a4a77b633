"""Which IMAP server a loopback mail stack runs: Dovecot (mailstack.MailStack) or Cyrus
IMAP (cyrus_stack.CyrusStack), both behind Postfix and with the same interface."""

from __future__ import annotations

from mailbus.stacks.mailstack import MailStack

SERVERS = ("dovecot", "cyrus")


def new_mail_stack(server: str = "dovecot", **options: object) -> MailStack:
    """A stack (not started) running `server`; `options` are MailStack's."""
    if server == "dovecot":
        return MailStack(**options)  # type: ignore[arg-type]
    if server == "cyrus":
        from mailbus.stacks.cyrus_stack import CyrusStack

        return CyrusStack(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown mail server {server!r} (known: {', '.join(SERVERS)})")

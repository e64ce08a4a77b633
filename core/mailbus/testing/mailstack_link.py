"""Where the loopback mail stack (Dovecot or Cyrus IMAP, and Postfix) comes from:
mailbus.stacks, the same stacks our own tests and benchmarks start. Only
`start_mail_stack` knows them."""

from __future__ import annotations

from typing import Any

from mailbus.testing.buses import BusError


def start_mail_stack(server: str = "dovecot") -> Any:
    """A started `MailStack` running `server` (stop it with `.stop()`); BusError when it
    cannot start."""
    from mailbus.stacks.mail_servers import new_mail_stack
    from mailbus.stacks.mailstack import MailStackError

    stack = new_mail_stack(server)
    try:
        stack.start()
    except MailStackError as exc:
        stack.stop()
        raise BusError(
            f"--mailbus-transport=mail needs {server} (and Postfix, as root) on this machine: "
            f"{exc}; point --mailbus-config at your own mail server instead"
        ) from None
    except BaseException:
        stack.stop()
        raise
    return stack

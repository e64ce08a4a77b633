"""Where the loopback mail stack (Dovecot + Postfix) comes from: mailbus.stacks, the same
stack our own tests and benchmarks start. Only `start_mail_stack` knows it."""

from __future__ import annotations

from typing import Any

from mailbus.testing.buses import BusError


def start_mail_stack() -> Any:
    """A started `MailStack` (stop it with `.stop()`); BusError when it cannot start."""
    from mailbus.stacks.mailstack import MailStack, MailStackError

    stack = MailStack()
    try:
        stack.start()
    except MailStackError as exc:
        stack.stop()
        raise BusError(
            f"--mailbus-transport=mail needs Dovecot (and Postfix, as root) on this machine: "
            f"{exc}; point --mailbus-config at your own mail server instead"
        ) from None
    except BaseException:
        stack.stop()
        raise
    return stack

"""Where the loopback mail stack (Dovecot + Postfix) comes from: today the repository's
tests/mail/mailstack.py. Only `start_mail_stack` knows it, so that moving the stack into
the package changes this one function."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mailbus.testing.buses import BusError


def start_mail_stack() -> Any:
    """A started `MailStack` (stop it with `.stop()`); BusError when there is none."""
    mail_dir = Path(__file__).resolve().parents[3] / "tests" / "mail"
    if not (mail_dir / "mailstack.py").is_file():
        raise BusError(
            "--mailbus-transport=mail needs the loopback mail stack (tests/mail/mailstack.py "
            "of a Mailbus checkout); point --mailbus-config at your own mail server instead"
        )
    if str(mail_dir) not in sys.path:
        sys.path.insert(0, str(mail_dir))
    from mailstack import MailStack  # type: ignore[import-not-found]

    stack = MailStack()
    try:
        stack.start()
    except BaseException:
        stack.stop()
        raise
    return stack

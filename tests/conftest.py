"""Shared by every test directory: puts tests/ on sys.path so that any test imports the
one bounded-wait helper, `from waiting import eventually` (and the Pilot twin `until`),
and starts the loopback mail stack once for the whole run, for whichever area needs it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


@pytest.fixture(scope="session")
def mail_stack() -> Iterator[Any]:
    """One Dovecot + Postfix on loopback for the session (tests/mail/mailstack.py); every
    test makes its own users, so the mail and stem tests share it."""
    mail_dir = str(Path(TESTS) / "mail")
    if mail_dir not in sys.path:
        sys.path.insert(0, mail_dir)
    from mailstack import MailStack

    stack = MailStack()
    if not stack.has_postfix:
        # Said loudly: without root the SMTP side is not tested against Postfix.
        print(f"\nMAILSTACK: {stack.why_no_postfix}; SMTP goes through the LMTP relay")
    with stack:
        yield stack

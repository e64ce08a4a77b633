"""Observers see the whole conversation over email: responses are
addressed to the client, and still every participant reading the shared inbox (the
workbench's model, a recorder) sees them; a client and a server in two processes, over
the real Postfix + Dovecot stack."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mailbus.stacks.mailstack import MailStack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from observers_support import check, run_scenario


@pytest.mark.mailstack
@pytest.mark.slow
def test_observers_see_every_response_over_email(mail_stack: MailStack, tmp_path: Path) -> None:
    user = mail_stack.add_user()
    raw: dict[str, Any] = {
        "transport": "email",
        "url-smtp": mail_stack.smtps_url,
        "url-imap": mail_stack.imaps_url,
        "username": user.address,
        "password": user.password,
        "ca-file": mail_stack.ca_file,
        "polling-period-ms": 20,
        "recipients": {"to": [user.address]},
    }
    roles = {role: raw for role in ("server", "client", "watch", "record")}
    model, row = run_scenario(roles, tmp_path / "session", calls=5)
    check(model, row, calls=5)

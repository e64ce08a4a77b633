"""Fixtures of the mail tests: the session's loopback Dovecot + Postfix stack
(tests/conftest.py), a fresh user (so an empty inbox) per test, and options pointing at them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mailbus.options import Options, options_from_mapping
from mailbus.stacks.mailstack import MailStack, User

# `mail_stack`, the one stack of the session, is in tests/conftest.py (stem uses it too).


@pytest.fixture
def user(mail_stack: MailStack) -> User:
    return mail_stack.add_user()


OptionsFactory = Callable[..., Options]


def make_options(stack: MailStack, user: User, **overrides: Any) -> Options:
    """Options for `user` on `stack` over SMTPS + IMAPS; `overrides` use the TOML key
    names with `_` for `-` (mail={...} for the [mail] table)."""
    raw: dict[str, Any] = {
        "transport": "email",
        "url-smtp": stack.smtps_url,
        "url-imap": stack.imaps_url,
        "username": user.address,
        "password": user.password,
        "ca-file": stack.ca_file,
        "polling-period-ms": 10,
        "recipients": {"to": [user.address]},
        "mail": {"reconnect-max-s": 0.5},
    }
    for key, value in overrides.items():
        raw[key.replace("_", "-")] = value
    return options_from_mapping(raw, {})


@pytest.fixture
def options_for(mail_stack: MailStack) -> OptionsFactory:
    def factory(user: User, **overrides: Any) -> Options:
        return make_options(mail_stack, user, **overrides)

    return factory


@pytest.fixture
def smtp_stack(mail_stack: MailStack) -> MailStack:
    """The stack, for tests that send over SMTP (Postfix, or the relay without root)."""
    return mail_stack

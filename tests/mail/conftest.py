"""Fixtures of the mail tests: the session's loopback stacks (tests/conftest.py), a fresh
user (so an empty inbox) per test, and options pointing at them.

Every test that uses `mail_stack` runs once per mail server (`mail_server`: Dovecot and
Cyrus IMAP, or the one --mailbus-mail-server names); each server's stack is started
once per test worker. A test that holds for one server only says so with
`@pytest.mark.parametrize("mail_server", ["dovecot"], indirect=True)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mailbus.options import Options, options_from_mapping
from mailbus.stacks.mail_servers import SERVERS
from mailbus.stacks.mailstack import MailStack, User


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mail_server" not in metafunc.fixturenames:
        return
    if any("mail_server" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")):
        return  # the test names its servers
    chosen = metafunc.config.getoption("mailbus_mail_server", None)
    servers = [chosen] if chosen else list(SERVERS)
    metafunc.parametrize("mail_server", servers, indirect=True, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --mailbus-mail-server, a test that names only other servers does not run."""
    chosen = config.getoption("mailbus_mail_server", None)
    if not chosen:
        return
    kept, dropped = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        server = params.params.get("mail_server", chosen) if params is not None else chosen
        (kept if server == chosen else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def mail_server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def mail_stack(request: pytest.FixtureRequest, mail_server: str) -> MailStack:
    """The session's stack of this test's server (tests/conftest.py starts each once)."""
    stack: MailStack = request.getfixturevalue(f"{mail_server}_stack")
    return stack


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

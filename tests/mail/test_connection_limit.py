"""An account that has reached the server's connection limit is reported as that, with
the limit and the fix, never as a wrong password."""

from __future__ import annotations

import contextlib

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory
from mailbus.mail.errors import MailConnectionLimitError, MailLoginError
from mailbus.mail.imap_receiver import connection_limit_refusal
from mailbus.stacks.mailstack import HOST, MAX_USERIP_CONNECTIONS, MailStack, User

pytestmark = pytest.mark.mailstack


def test_the_participant_past_the_limit_is_told_the_limit_not_the_password(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    held: list[imapclient.IMAPClient] = []
    try:
        for _ in range(MAX_USERIP_CONNECTIONS):
            client = imapclient.IMAPClient(HOST, port=mail_stack.imap_port, ssl=False, timeout=30)
            client.login(user.address, user.password)
            held.append(client)
        with pytest.raises(MailConnectionLimitError) as info:
            mailbus.Context(options_for(user)).init()
        message = str(info.value)
        # The server's own words: Dovecot names its setting, Cyrus says what happened.
        assert {
            "dovecot": f"mail_max_userip_connections={MAX_USERIP_CONNECTIONS}",
            "cyrus": "Too many open connections",
        }[mail_stack.server] in message
        assert "fewer participants" in message
        assert "password" not in message.lower()
        assert not isinstance(info.value, MailLoginError)
        held.pop().logout()  # one leaves: the next participant gets in
        with mailbus.Context(options_for(user)) as ctx:
            assert ctx.transport.receiver is not None
    finally:
        for client in held:
            with contextlib.suppress(Exception):
                client.logout()


@pytest.mark.parametrize(
    ("server_says", "is_limit"),
    [
        ("b'[LIMIT] Maximum number of connections from user+IP exceeded'", True),
        ("[UNAVAILABLE] Too many connections for this account", True),
        ("b'Too many open connections (u1@mailbus.test)'", True),  # Cyrus IMAP
        ("b'[AUTHENTICATIONFAILED] Authentication failed.'", False),
        ("LOGIN failed", False),
    ],
)
def test_which_refusals_are_connection_limits(server_says: str, is_limit: bool) -> None:
    found = connection_limit_refusal(server_says)
    assert (found is not None) is is_limit
    if found is not None:
        assert not found.startswith("b'")

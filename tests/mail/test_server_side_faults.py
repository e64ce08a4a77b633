"""Bad input from the server side, on every server of the suite: the mailbox a reader
holds is deleted (then made again, with a new UIDVALIDITY) or renamed away, the
account's quota is full, an email is over the server's size limit. Nothing is lost and
nothing is skipped without a word. (A connection cut mid-FETCH or in IDLE:
test_connection_cuts.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory
from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.outbox.listing import list_outbox, show_entry
from mailbus.stacks.mailstack import HOST, MailStack, User
from test_faults import _mailbus_email
from test_integration import Events, take

pytestmark = pytest.mark.mailstack


def client_of(stack: MailStack, user: User) -> imapclient.IMAPClient:
    context = ssl_context(TlsSettings(ca_file=stack.ca_file))
    client = imapclient.IMAPClient(HOST, stack.imaps_port, ssl=True, ssl_context=context)
    client.login(user.address, user.password)
    return client


def test_a_mailbox_deleted_and_made_again_under_its_reader_is_read_from_its_new_start(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    other = client_of(mail_stack, user)
    other.create_folder("Work")
    ctx = mailbus.Context(options_for(user, mail={"mailbox": "Work", "reconnect-max-s": 0.3}))
    events = Events()
    ctx.tracer.add_listener(events)
    try:
        with ctx:
            sub = ctx.subscription("work", depth=10)
            other.append("Work", _mailbus_email(user, "first"))
            assert take(sub, 1) == ["first"]
            # Quiet first, so that the receiver is in IDLE (Dovecot then sends an untagged
            # NO, Cyrus closes the connection; between polls Dovecot answers NOOP so).
            assert events.wait_for("mail.idle"), "never went to IDLE"
            # Deleted while the receiver has it EXAMINEd; made again at once: a new
            # UIDVALIDITY, and its first message has UID 1 again.
            other.delete_folder("Work")
            other.create_folder("Work")
            other.append("Work", _mailbus_email(user, "second"))
            assert take(sub, 1, timeout=20) == ["second"], events.items[-10:]
            [changed] = events.wait_for("mail.uidvalidity_changed")
            assert changed.extra["old"] != changed.extra["new"]
    finally:
        other.logout()


def test_a_mailbox_renamed_away_from_its_reader_is_reported_and_read_when_back(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    other = client_of(mail_stack, user)
    other.create_folder("Work")
    ctx = mailbus.Context(options_for(user, mail={"mailbox": "Work", "reconnect-max-s": 0.3}))
    events = Events()
    ctx.tracer.add_listener(events)
    try:
        with ctx:
            sub = ctx.subscription("work", depth=10)
            other.append("Work", _mailbus_email(user, "first"))
            assert take(sub, 1) == ["first"]
            other.rename_folder("Work", "Archive")
            # The reader loses its mailbox: it says so (a failed reconnection names
            # the missing mailbox) instead of reading nothing in silence.
            failed = events.wait_for("mail.reconnect_failed")
            assert any("Work" in (e.detail or "") for e in failed), [e.detail for e in failed]
            other.create_folder("Work")
            other.append("Work", _mailbus_email(user, "second"))
            assert take(sub, 1, timeout=20) == ["second"]
        assert ctx.counters["received"] == 2
    finally:
        other.logout()


@pytest.mark.parametrize(
    "mail_server", ["cyrus"], indirect=True
)  # the stack's Dovecot has no quota
def test_mail_over_a_full_quota_waits_in_the_queue_and_arrives_when_there_is_room(
    mail_stack: Any, user: User, options_for: OptionsFactory
) -> None:
    mail_stack.set_quota(user, 1)  # 1 KiB: full after the first message
    ctx = mailbus.Context(options_for(user))
    with ctx:
        sub = ctx.subscription("q", depth=20)
        pub = ctx.publisher("q")
        pub.publish("x" * 2000)  # over the quota by itself: Cyrus still takes the first
        assert take(sub, 1) == ["x" * 2000]
        for i in range(3):
            pub.publish(f"over quota {i}")
        sender: Any = ctx.transport.sender
        assert sender.flush(10)  # Postfix took them: the refusal is LMTP's, later
        assert take(sub, 3, timeout=3) == []  # refused for now (452), kept by Postfix
        if mail_stack.has_postfix:
            assert "Mail queue is empty" not in mail_stack.postfix_queue()
            assert "quota" in mail_stack.postfix_log_of_queue().lower()
        mail_stack.set_quota(user, 10_000)
        assert sorted(take(sub, 3, timeout=30)) == [f"over quota {i}" for i in range(3)]


def test_an_email_over_the_servers_size_limit_is_refused_kept_and_the_next_goes_through(
    mail_stack: MailStack, user: User, options_for: OptionsFactory, tmp_path: Path
) -> None:
    # The server's limit (Postfix's message_size_limit, which the Cyrus stack's
    # maxmessagesize matches) refuses the email for good: the outbox says so once,
    # keeps it as a dead letter with the server's words, and the next mail is not held.
    outbox = tmp_path / "outbox"
    ctx = mailbus.Context(options_for(user, outbox={"dir": str(outbox)}))
    events = Events()
    ctx.tracer.add_listener(events)
    huge = "\n".join(["x" * 900] * 12_000)  # about 10.8 MB, over the stack's 10,240,000
    with ctx:
        sub = ctx.subscription("big", depth=5)
        pub = ctx.publisher("big")
        pub.publish(huge)
        pub.publish("small")
        assert take(sub, 1) == ["small"]
        [dead] = events.wait_for("outbox.dead_lettered")
        assert "552: the email of 10," in dead.detail, dead.detail
        assert "over the server's size limit" in dead.detail
        assert dead.extra["attempts"] == 1  # refused for good: not retried
        assert events.of("outbox.rescheduled") == []
    [kept] = [item for item in list_outbox(outbox) if item.state != "cleanup"]
    assert kept.state == "dead" and kept.size > 10_240_000
    assert kept.last_error == dead.detail
    _, stored = show_entry(outbox, kept.id)
    assert len(stored) == kept.size  # the whole email, not a stub
    assert ctx.counters["received"] == 1


@pytest.mark.parametrize("mail_server", ["cyrus"], indirect=True)  # a Cyrus stack setting
def test_accounts_made_at_the_same_moment_each_read_only_their_own_mail(
    mail_stack: Any,
) -> None:
    # Cyrus 3.6 gives mailboxes made by fresh processes within one second the same
    # unique id; with id-named directories two users then shared one INBOX and each
    # read the other's mail (a request/response test counted the response as a second
    # request). Each round makes its inboxes at once, by separate admin connections.
    users: list[User] = []
    for _ in range(4):
        users += mail_stack.add_users(5)
    for u in users:
        mail_stack.deliver(u.address, _mailbus_email(u, f"to {u.name}"))
    holding: dict[str, int] = {}
    for u in users:
        client = client_of(mail_stack, u)
        try:
            holding[u.name] = int(client.folder_status("INBOX", [b"MESSAGES"])[b"MESSAGES"])
        finally:
            client.logout()
    assert holding == {u.name: 1 for u in users}

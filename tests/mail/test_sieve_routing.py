"""The routed mode on the real stacks: Dovecot's Pigeonhole Sieve and Cyrus's Sieve file
Mailbus mail into per-topic folders, and a participant reads only its own folders."""

from __future__ import annotations

import ssl
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory, make_options
from mailbus.errors import ConfigError
from mailbus.mail.sieve_install import MailSieveError, SieveSettings, install_script
from mailbus.mail.sieve_script import Routes, folder_name, sieve_script
from mailbus.mail.tls import TlsSettings
from mailbus.stacks.cyrus_stack import CyrusStack
from mailbus.stacks.mailstack import MailStack, User, free_port
from mailbus.trace import Kind, TraceEvent

TOPIC, OTHER, UNROUTED, SERVICE = "robot/pose", "robot/camera", "chat", "add"
ROUTED = {"routing": "sieve", "routed-topics": [TOPIC, OTHER], "routed-services": [SERVICE]}


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)  # polling a condition, bounded by the deadline
    return True


def mailbox_counts(stack: MailStack, user: User) -> dict[str, int]:
    """How many emails each folder of `user` holds, read with a plain IMAP client."""
    context = ssl.create_default_context(cafile=stack.ca_file)
    with imapclient.IMAPClient("127.0.0.1", stack.imaps_port, ssl_context=context) as client:
        client.login(user.address, user.password)
        return {
            name: int(client.folder_status(name, [b"MESSAGES"])[b"MESSAGES"])
            for _, _, name in client.list_folders()
        }


@pytest.mark.mailstack
def test_topics_go_to_their_folders_and_a_subscriber_reads_only_its_own(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    routed = {**ROUTED, "url-sieve": mail_stack.sieve_url}
    fetched: list[TraceEvent] = []
    subscriber = mailbus.Context(options_for(user, mail=routed))
    subscriber.tracer.add_listener(
        lambda e: fetched.append(e) if e.kind == "mail.folder_fetched" else None
    )
    with subscriber, mailbus.Context(options_for(user, mail=ROUTED)) as other:
        sub = subscriber.subscription(TOPIC, depth=20)
        chat = subscriber.subscription(UNROUTED, depth=20)
        client = subscriber.client(SERVICE)
        server = other.server(SERVICE)
        receiver: Any = subscriber.transport.receiver
        pose, camera = folder_name("mailbus", "t", TOPIC), folder_name("mailbus", "t", OTHER)
        responses = folder_name("mailbus", "r", SERVICE)
        # Its own folders, and INBOX for the topic the script does not route: read
        # as soon as the entities exist (mail sent from now on is not missed).
        assert receiver.folders == sorted([pose, responses, "INBOX"])
        big = "x" * 20_000  # the other topic's bodies: large, and never fetched here
        for i in range(3):
            other.publisher(OTHER).publish(f"{big}{i}")
            other.publisher(TOPIC).publish(f"pose {i}")
        other.publisher(UNROUTED).publish("hello")
        foreign = b"From: a@b.test\r\nSubject: " + TOPIC.encode() + b"\r\n\r\nhi\r\n"
        mail_stack.deliver(user.address, foreign)
        got = [mailbus.wait_for_message(sub, 15.0) for _ in range(3)]
        assert sorted(m.body for m in got if m is not None) == ["pose 0", "pose 1", "pose 2"]
        message = mailbus.wait_for_message(chat, 15.0)
        assert message is not None and message.body == "hello"  # read from INBOX

        # Request/response in the routed mode: the server reads the service's folder,
        # the client its responses' folder.
        def serve() -> None:
            request = mailbus.wait_for_request(server, 15.0)
            if request is not None:
                server.send_response(request, request.body.upper())

        thread = threading.Thread(target=serve)
        thread.start()
        response = client.call("ping", timeout=15)
        thread.join(15)
        assert response.body == "PING"

        counts = mailbox_counts(mail_stack, user)
        assert counts[pose] == 3 and counts[camera] == 3
        assert counts[folder_name("mailbus", "s", SERVICE)] == 1 and counts[responses] == 1
        # The foreign email (with a routed Subject) and the unrouted topic stay in INBOX.
        assert counts["INBOX"] == 2
        folders = {e.extra["folder"] for e in fetched}
        assert camera not in folders and pose in folders and responses in folders
        assert receiver.counters["body_bytes_fetched"] < 20_000  # no body of the other topic
        assert sum(e.extra["bodies"] for e in fetched if e.extra["folder"] == pose) == 3
        assert subscriber.counters["duplicates"] == 0


@pytest.mark.mailstack
@pytest.mark.parametrize("mail_server", ["dovecot"], indirect=True)  # Cyrus has no NOTIFY
def test_a_quiet_routed_receiver_idles_and_notify_wakes_it_for_its_folder(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    install_script(
        SieveSettings(mail_stack.sieve_url, user.address, user.password, tls(mail_stack)),
        sieve_script(Routes((TOPIC, OTHER))),
    )
    quiet = {"routing": "sieve", "routed-topics": [TOPIC, OTHER]}
    quiet |= {"quiet-ms": 100, "idle-recheck-s": 60}
    with (
        mailbus.Context(options_for(user, mail=quiet)) as ctx,
        mailbus.Context(options_for(user)) as publisher,
    ):
        sub = ctx.subscription(TOPIC, depth=10)
        receiver: Any = ctx.transport.receiver
        assert wait_until(lambda: receiver.counters["idles"] >= 1, 15), "never went to IDLE"
        polls = receiver.counters["polls"]
        publisher.publisher(TOPIC).publish("after the quiet")
        message = mailbus.wait_for_message(sub, 10.0)  # the IDLE lasts up to 60 s
        assert message is not None and message.body == "after the quiet"
        assert receiver.counters["idle_wakeups"] >= 1  # NOTIFY announced it
        assert receiver.counters["polls"] - polls <= 3  # no polling while quiet
        # A subscription made during an IDLE: its folder is read when it returns.
        assert wait_until(lambda: receiver.counters["idles"] >= 2, 15)
        later = ctx.subscription(OTHER, depth=10)
        assert folder_name("mailbus", "t", OTHER) in receiver.folders
        publisher.publisher(OTHER).publish("to the new folder")
        message = mailbus.wait_for_message(later, 10.0)
        assert message is not None and message.body == "to the new folder"


@pytest.mark.mailstack
def test_a_subscription_made_before_init_reads_its_folder(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    # The way to catch up (docs/mail.md): entities first, then init. The routed receiver
    # was told only of entities made after init, and read no folder at all.
    routed = {"routing": "sieve", "routed-topics": [TOPIC], "url-sieve": mail_stack.sieve_url}
    ctx = mailbus.Context(options_for(user, mail=routed))
    sub = ctx.subscription(TOPIC, depth=10)
    with ctx, mailbus.Context(options_for(user)) as publisher:
        receiver: Any = ctx.transport.receiver
        assert receiver.folders == [folder_name("mailbus", "t", TOPIC)]
        publisher.publisher(TOPIC).publish("made before init")
        message = mailbus.wait_for_message(sub, 15.0)
        assert message is not None and message.body == "made before init"


@pytest.mark.mailstack
def test_one_message_after_another_in_one_folder_keeps_coming(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    # Each new mail must show in the next poll, also in the folder read last (a folder
    # left selected showed its old UIDNEXT to LIST-STATUS for ever).
    routed = {"routing": "sieve", "routed-topics": [TOPIC], "url-sieve": mail_stack.sieve_url}
    with (
        mailbus.Context(options_for(user, mail=routed)) as ctx,
        mailbus.Context(options_for(user)) as publisher,
    ):
        sub = ctx.subscription(TOPIC, depth=10)
        receiver: Any = ctx.transport.receiver
        assert len(receiver.folders) == 1
        for i in range(3):
            publisher.publisher(TOPIC).publish(f"n{i}")
            message = mailbus.wait_for_message(sub, 10.0)
            assert message is not None and message.body == f"n{i}"


@pytest.mark.mailstack
def test_names_with_quotes_backslashes_stars_and_accents_are_filed_by_the_real_sieve(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    # The script escapes them and Pigeonhole decodes the Subject (RFC 2047) before
    # comparing: each lands in its own folder, none in INBOX or a wrong folder.
    names = ['say "hi" \\ *', "température/東京", "a*"]
    routed = {"routing": "sieve", "routed-topics": names, "url-sieve": mail_stack.sieve_url}
    with (
        mailbus.Context(options_for(user, mail=routed)) as ctx,
        mailbus.Context(options_for(user)) as publisher,
    ):
        subs = [ctx.subscription(name, depth=5) for name in names]
        for name in names:
            publisher.publisher(name).publish(f"to {name}")
        for name, sub in zip(names, subs, strict=True):
            message = mailbus.wait_for_message(sub, 15.0)
            assert message is not None and message.body == f"to {name}"
    counts = mailbox_counts(mail_stack, user)
    assert counts.pop("INBOX") == 0
    assert counts == {folder_name("mailbus", "t", name): 1 for name in names}


@pytest.mark.mailstack
def test_an_observer_with_routed_read_all_sees_every_folder(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    # The workbench or a recorder subscribes to nothing and still sees every email.
    routed = {**ROUTED, "url-sieve": mail_stack.sieve_url}
    seen: list[str] = []
    watcher = mailbus.Context(options_for(user, mail={**routed, "routed-read": "all"}))
    watcher.tracer.add_listener(
        lambda e: seen.append(e.name or "") if e.kind == Kind.RECEIVED else None
    )
    with watcher, mailbus.Context(options_for(user, mail=routed)) as other:
        receiver: Any = watcher.transport.receiver
        for topic in (TOPIC, OTHER, UNROUTED):
            other.publisher(topic).publish("seen")
        assert wait_until(lambda: sorted(seen) == sorted([TOPIC, OTHER, UNROUTED]), 15), seen
        assert len(receiver.folders) == 5  # 2 topics, a service's 2 folders, INBOX


@pytest.mark.mailstack
@pytest.mark.parametrize("mail_server", ["cyrus"], indirect=True)
def test_on_cyrus_without_notify_a_quiet_routed_receiver_polls_and_never_idles(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    # Cyrus IMAP 3.6 offers LIST-STATUS but not NOTIFY: the receiver reads that from
    # CAPABILITY and, once quiet, polls every folder in one LIST-STATUS at its longest
    # period instead of waiting in an IDLE that would announce the selected folder only.
    install_script(
        SieveSettings(mail_stack.sieve_url, user.address, user.password, tls(mail_stack)),
        sieve_script(Routes((TOPIC, OTHER))),
    )
    quiet = {"routing": "sieve", "routed-topics": [TOPIC, OTHER]}
    quiet |= {"quiet-ms": 100, "idle-recheck-s": 60}
    connected: list[TraceEvent] = []
    ctx = mailbus.Context(options_for(user, mail=quiet))
    ctx.tracer.add_listener(lambda e: connected.append(e) if e.kind == "mail.connected" else None)
    with ctx, mailbus.Context(options_for(user)) as publisher:
        sub = ctx.subscription(TOPIC, depth=10)
        receiver: Any = ctx.transport.receiver
        assert connected and connected[0].extra["notify"] is False
        assert receiver.schedule.can_idle is False
        polls = receiver.counters["status_polls"]
        assert wait_until(lambda: receiver.counters["status_polls"] >= polls + 5, 15)
        publisher.publisher(TOPIC).publish("after the quiet")
        message = mailbus.wait_for_message(sub, 10.0)
        assert message is not None and message.body == "after the quiet"
        later = ctx.subscription(OTHER, depth=10)
        publisher.publisher(OTHER).publish("to the new folder")
        message = mailbus.wait_for_message(later, 10.0)
        assert message is not None and message.body == "to the new folder"
        assert receiver.counters["idles"] == 0  # no IDLE without NOTIFY


@pytest.fixture(scope="module")
def cyrus_without_list_status() -> Iterator[CyrusStack]:
    """A Cyrus that does not announce LIST-STATUS (nor, as 3.6, NOTIFY): an older server."""
    with CyrusStack(postfix=False, suppress_capabilities=("LIST-STATUS",)) as stack:
        yield stack


@pytest.mark.mailstack
def test_without_list_status_and_notify_the_routed_receiver_polls_each_folder(
    cyrus_without_list_status: CyrusStack,
) -> None:
    from mailbus.mail.imap_receiver import ImapSettings
    from mailbus.mail.routed_receiver import RoutedImapReceiver

    stack = cyrus_without_list_status
    user = stack.add_user()
    install_script(
        SieveSettings(stack.sieve_url, user.address, user.password, tls(stack)),
        sieve_script(Routes((TOPIC, OTHER))),
    )
    settings = ImapSettings(stack.imaps_url, user.address, user.password, tls(stack))
    receiver = RoutedImapReceiver(settings, routes=Routes((TOPIC, OTHER)), quiet_s=0.0)
    receiver.connect()
    try:
        # Read from the real server's CAPABILITY, not set by the test.
        assert not receiver._has_list_status and not receiver._has_notify
        assert receiver.receive(0.0) == []  # this thread receives: follow() applies at once
        receiver.follow(frozenset({TOPIC, OTHER}), frozenset(), frozenset())
        assert len(receiver.folders) == 2  # followed before anything is published
        with mailbus.Context(make_options(stack, user)) as publisher:
            publisher.publisher(OTHER).publish("one")
            publisher.publisher(TOPIC).publish("two")
            got: list[Any] = []
            deadline = time.monotonic() + 15
            while len(got) < 2 and time.monotonic() < deadline:
                got += receiver.receive(0.5)
        origins = sorted(item.origin.split("/")[0] for item in got)
        assert origins == sorted(folder_name("mailbus", "t", t) for t in (TOPIC, OTHER))
        assert receiver.counters["idles"] == 0  # no IDLE without NOTIFY
        assert receiver.counters["status_polls"] >= receiver.counters["polls"]
    finally:
        receiver.close()


@pytest.mark.mailstack
def test_a_folder_sieve_creates_while_the_receiver_subscribes_is_read_from_its_first_message(
    mail_stack: MailStack, user: User, options_for: OptionsFactory, monkeypatch: Any
) -> None:
    # The window: our STATUS finds the folder missing, Sieve's `fileinto :create` makes
    # it with the first message inside, our CREATE is refused. The wrapper puts the
    # delivery there every time.
    routed = {"routing": "sieve", "routed-topics": [TOPIC], "url-sieve": mail_stack.sieve_url}
    folder = folder_name("mailbus", "t", TOPIC)
    create = imapclient.IMAPClient.create_folder
    raced: list[bool] = []
    kinds: list[str] = []
    with (
        mailbus.Context(options_for(user)) as publisher,
        mailbus.Context(options_for(user, mail=routed)) as ctx,
    ):

        def deliver_first(client: imapclient.IMAPClient, name: str) -> Any:
            publisher.publisher(TOPIC).publish("first")
            raced.append(wait_until(lambda: mailbox_counts(mail_stack, user).get(name) == 1, 15))
            return create(client, name)

        monkeypatch.setattr(imapclient.IMAPClient, "create_folder", deliver_first)
        ctx.tracer.add_listener(lambda e: kinds.append(e.kind))
        sub = ctx.subscription(TOPIC, depth=10)
        receiver: Any = ctx.transport.receiver
        assert raced == [True]  # Sieve made the folder before our CREATE
        assert receiver.folders == [folder]  # followed when subscription() returned
        publisher.publisher(TOPIC).publish("second")
        got = [mailbus.wait_for_message(sub, 15.0) for _ in range(2)]
        assert [m.body if m else None for m in got] == ["first", "second"]
        assert "mail.disconnected" not in kinds


def tls(stack: MailStack) -> TlsSettings:
    return TlsSettings(ca_file=stack.ca_file)


def record_sieve_answers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What the installer's ManageSieve client is told (LISTSCRIPTS, GETSCRIPT), in order."""
    from mailbus.mail.sieve_install import _VerifyingClient

    seen: list[tuple[str, Any]] = []
    for name in ("listscripts", "getscript"):
        method = getattr(_VerifyingClient, name)

        def spy(self: Any, *args: Any, _method: Any = method, _name: str = name) -> Any:
            answer = _method(self, *args)
            seen.append((_name, answer))
            return answer

        monkeypatch.setattr(_VerifyingClient, name, spy)
    return seen


def sieve_state(settings: SieveSettings) -> tuple[Any, str | None]:
    """What ManageSieve shows of the account now (active script, others; Mailbus's
    script): what a failed installation test prints."""
    from mailbus.mail.sieve_install import _VerifyingClient

    client = _VerifyingClient(settings)
    try:
        client.connect(settings.username, settings.password, starttls=True)
        return client.listscripts(), client.getscript("mailbus")
    finally:
        client.logout()


@pytest.mark.mailstack
def test_the_script_installs_once_and_never_replaces_the_users_own(
    mail_stack: MailStack, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = SieveSettings(mail_stack.sieve_url, user.address, user.password, tls(mail_stack))
    script = sieve_script(Routes((TOPIC,)))
    assert install_script(settings, script) is True
    seen = record_sieve_answers(monkeypatch)
    # Identical: left alone. (A failure prints what the installer was told and what
    # the server shows afterwards.)
    assert install_script(settings, script) is False, (seen, sieve_state(settings))
    monkeypatch.undo()
    assert install_script(settings, sieve_script(Routes((TOPIC, OTHER)))) is True
    with pytest.raises(MailSieveError, match="username and password"):
        install_script(SieveSettings(settings.url, user.address, "wrong", settings.tls), script)
    with pytest.raises(MailSieveError, match="certificate verify failed"):
        install_script(SieveSettings(settings.url, user.address, user.password), script)
    closed = f"sieve://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(MailSieveError, match=r"Connection to server failed|cannot reach"):
        install_script(SieveSettings(closed, user.address, user.password, settings.tls), script)
    # The user's own active script is never switched off.
    own = mail_stack.add_user()
    mine = SieveSettings(mail_stack.sieve_url, own.address, own.password, tls(mail_stack))
    from sievelib.managesieve import Client

    raw = Client("127.0.0.1", mail_stack.sieve_port)
    with warnings.catch_warnings():  # plain text on loopback, for this setup step only
        warnings.simplefilter("ignore")
        raw.connect(own.address, own.password, starttls=False)
    assert raw.putscript("vacation", "keep;\n") and raw.setactive("vacation")
    raw.logout()
    with pytest.raises(MailSieveError, match="include :personal"):
        install_script(mine, script)


@pytest.mark.parametrize(
    ("mail", "key"),
    [
        ({"routing": "sieve", "routed-topics": ["bad\nname"]}, "mail.routed-topics"),
        ({"routing": "sieve", "routed-services": ["é" * 80]}, "mail.routed-services"),
        ({"routing": "sieve", "routed-topics": [3]}, "mail.routed-topics"),
        ({"routing": "sieve", "folder-prefix": "Mail.bus"}, "mail.folder-prefix"),
        ({"routing": "folders"}, "mail.routing"),
        ({"routed-topics": ["a"]}, "mail.routed-topics"),
        ({"routing": "sieve", "mailbox": "Other"}, "mail.mailbox"),
        ({"routing": "sieve", "url-sieve": "imap://x"}, "mail.url-sieve"),
        ({"routing": "sieve", "routed-read": "some"}, "mail.routed-read"),
        ({"routed-read": "all"}, "mail.routed-read"),
    ],
)
def test_bad_routed_settings_are_refused_before_connecting(mail: dict[str, Any], key: str) -> None:
    from mailbus.mail.transport import create_transport
    from mailbus.options import options_from_mapping
    from mailbus.trace import Tracer

    options = options_from_mapping(
        {
            "transport": "email",
            "url-smtp": "smtps://127.0.0.1:1",
            "url-imap": "imaps://127.0.0.1:1",  # nothing listens: it must not get that far
            "username": "u@mailbus.test",
            "password": "p",
            "mail": mail,
        },
        {},
    )
    with pytest.raises(ConfigError) as info:
        create_transport(options, Tracer())
    assert info.value.key == key


@pytest.mark.mailstack
def test_mail_sieve_prints_the_script_and_installs_it(
    mail_stack: MailStack, user: User, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from mailbus.cli import main

    config = tmp_path / "routed.toml"
    config.write_text(
        f"""transport = "email"
url-smtp = "{mail_stack.smtps_url}"
url-imap = "{mail_stack.imaps_url}"
username = "{user.address}"
ca-file = "{mail_stack.ca_file}"

[mail]
routing = "sieve"
routed-topics = ["robot/pose"]
url-sieve = "{mail_stack.sieve_url}"
"""
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAILBUS_PASSWORD", user.password)
        assert main(["--config", str(config), "mail-sieve"]) == 0
        assert capsys.readouterr().out == sieve_script(Routes((TOPIC,)))
        assert main(["--config", str(config), "mail-sieve", "--install"]) == 0
        assert capsys.readouterr().out.endswith(": installed\n")
        assert main(["--config", str(config), "mail-sieve", "--install"]) == 0
        assert capsys.readouterr().out.endswith(": already installed\n")
        assert main(["--config", str(config), "mail-check"]) == 0
        assert "routed mode: 1 topics, 0 services routed" in capsys.readouterr().out
        config.write_text(config.read_text().replace('routing = "sieve"\n', ""))
        assert main(["--config", str(config), "mail-sieve"]) == 2  # refused, with a reason
        assert "mail.routed-topics" in capsys.readouterr().err


@pytest.mark.mailstack
def test_a_routed_receiver_reconnects_and_resumes_each_folder(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    routed = {**ROUTED, "url-sieve": mail_stack.sieve_url, "reconnect-max-s": 0.5}
    with mailbus.Context(options_for(user, mail=routed)) as ctx:
        pose, camera = ctx.subscription(TOPIC, depth=10), ctx.subscription(OTHER, depth=10)
        receiver: Any = ctx.transport.receiver
        assert len(receiver.folders) == 2
        ctx.publisher(TOPIC).publish("before")
        message = mailbus.wait_for_message(pose, 15.0)
        assert message is not None and message.body == "before"
        try:
            mail_stack.stop_imap()
            assert wait_until(lambda: receiver.counters["disconnects"] >= 1, 15)
        finally:
            mail_stack.start_imap()
        assert wait_until(lambda: receiver.counters["connections_opened"] >= 2, 20)
        ctx.publisher(OTHER).publish("after")
        ctx.publisher(TOPIC).publish("after")
        for sub in (pose, camera):
            message = mailbus.wait_for_message(sub, 15.0)
            assert message is not None and message.body == "after"
        assert mailbus.wait_for_message(pose, 0.5) is None  # "before" not again
        assert ctx.counters["duplicates"] == 0

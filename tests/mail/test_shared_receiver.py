"""One IMAP receiver per process and inbox (`[mail] share = "process"`):
the dispatch to each context without a server, then the real stack with more contexts
in one process than the account's connection limit."""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

import imapclient
import mailbus
import pytest
from conftest import OptionsFactory
from mailbus.errors import ConfigError, TransportError
from mailbus.mail.errors import MailConnectionLimitError
from mailbus.mail.imap_receiver import ImapReceiver, ImapSettings
from mailbus.mail.kinds import MailKind
from mailbus.mail.routed_receiver import RoutedImapReceiver
from mailbus.mail.shared_receiver import (
    SharedImapReceiver,
    SharedReceiverHandle,
    ShareKey,
    _Registry,
)
from mailbus.mail.sieve_script import Routes
from mailbus.mail.transport import _receiver, mail_section
from mailbus.options import options_from_mapping
from mailbus.stacks.mailstack import HOST, MAX_USERIP_CONNECTIONS, MailStack, User
from mailbus.subscription import Subscription
from mailbus.trace import TraceEvent, Tracer
from mailbus.transport import Inbound, RawEmail
from waiting import eventually

WAIT_S = 20.0
_WAKE = object()


# -- the dispatch, with a fake connection ------------------------------------------------------
class FakeImap:
    """Stands in for ImapReceiver: `feed` is what the next receive() returns."""

    idle_wait_s = 1.0

    def __init__(self, tracer: Tracer, fail_connect: Exception | None = None) -> None:
        self.tracer = tracer
        self.counters: Counter[str] = Counter()
        self.fail_connect = fail_connect
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.closed = 0

    def connect(self) -> None:
        self.counters["connections_opened"] += 1
        if self.fail_connect is not None:
            raise self.fail_connect
        self.tracer.event(MailKind.CONNECTED, detail="fake")

    def feed(self, *bodies: str) -> None:
        self.inbox.put([RawEmail(body.encode(), origin=f"uid:{body}") for body in bodies])

    def receive(self, timeout: float | None) -> list[Inbound]:
        try:
            got = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return []
        if isinstance(got, Exception):
            raise got
        return [] if got is _WAKE else list(got)

    def wake(self) -> None:
        self.inbox.put(_WAKE)

    def close(self) -> None:
        self.closed += 1


class Factory:
    """Makes FakeImaps and remembers them."""

    def __init__(self, fail_connect: Exception | None = None) -> None:
        self.made: list[FakeImap] = []
        self.fail_connect = fail_connect

    def __call__(self, tracer: Tracer) -> Any:
        self.made.append(FakeImap(tracer, self.fail_connect))
        return self.made[-1]


def key(user: str = "u", **parameters: Any) -> ShareKey:
    settings = ImapSettings("imap://127.0.0.1:1", user, "secret")
    return ShareKey(settings, tuple(sorted(parameters.items())))


class Recorder:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def __call__(self, event: TraceEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def bodies(handle: SharedReceiverHandle, count: int) -> list[str]:
    got: list[str] = []

    def more() -> bool:
        got.extend(
            item.data.decode() for item in handle.receive(0.05) if isinstance(item, RawEmail)
        )
        return len(got) >= count

    eventually(more, WAIT_S, f"{count} emails")
    return got


@pytest.fixture
def registry() -> Iterator[_Registry]:
    made = _Registry()
    yield made
    for shared in made.receivers():  # a failed test must not leave a receiver open
        for handle in list(shared._handles):
            handle.close()


def handle_of(
    registry: _Registry, factory: Factory, k: ShareKey | None = None, tracer: Tracer | None = None
) -> SharedReceiverHandle:
    handle = SharedReceiverHandle(k or key(), factory, tracer, registry=registry)
    handle.connect()
    return handle


def test_every_attached_context_gets_each_email_once_and_a_joiner_only_what_follows(
    registry: _Registry,
) -> None:
    factory = Factory()
    first, second = handle_of(registry, factory), handle_of(registry, factory)
    assert len(factory.made) == 1 and first.shared is second.shared  # one connection
    fake = factory.made[0]
    fake.feed("a", "b")
    assert bodies(first, 2) == ["a", "b"]
    assert bodies(second, 2) == ["a", "b"]
    late = handle_of(registry, factory)
    fake.feed("c")
    assert [bodies(h, 1) for h in (first, second, late)] == [["c"]] * 3
    assert all(h.receive(0) == [] for h in (first, second, late))  # nothing twice
    assert fake.counters["connections_opened"] == 1


def test_closing_one_context_leaves_the_others_receiving_and_the_last_logs_out(
    registry: _Registry,
) -> None:
    factory = Factory()
    first, second = handle_of(registry, factory), handle_of(registry, factory)
    fake = factory.made[0]
    first.close()
    first.close()  # twice is harmless
    with pytest.raises(TransportError):
        first.receive(0)
    fake.feed("after")
    assert bodies(second, 1) == ["after"]
    assert fake.closed == 0
    second.close()
    assert fake.closed == 1
    assert registry.receivers() == []
    third = handle_of(registry, factory)  # a new receiver, a new login
    assert len(factory.made) == 2 and third.shared is not second.shared


def test_wake_ends_only_that_contexts_wait(registry: _Registry) -> None:
    factory = Factory()
    woken, other = handle_of(registry, factory), handle_of(registry, factory)
    results: list[list[Inbound]] = []
    thread = threading.Thread(target=lambda: results.append(woken.receive(WAIT_S * 4)))
    thread.start()
    woken.wake()
    thread.join(WAIT_S)
    assert not thread.is_alive() and results == [[]]
    assert other.receive(0.05) == []  # its wait ran to its timeout
    other.wake()
    assert other.receive(WAIT_S * 4) == []  # a wake before the wait is kept
    factory.made[0].feed("x")
    assert bodies(woken, 1) == ["x"] and bodies(other, 1) == ["x"]


def test_different_keys_get_different_receivers(registry: _Registry) -> None:
    factory = Factory()
    a = handle_of(registry, factory, key("a"))
    b = handle_of(registry, factory, key("b"))
    slow = handle_of(registry, factory, key("a", period_s=1.0))
    again = handle_of(registry, factory, key("a"))
    assert len(factory.made) == 3
    assert again.shared is a.shared and b.shared is not a.shared
    assert slow.shared is not a.shared
    factory.made[1].feed("for b")
    assert bodies(b, 1) == ["for b"] and a.receive(0.05) == []


def test_a_failed_login_is_raised_to_its_context_and_forgotten(registry: _Registry) -> None:
    factory = Factory(fail_connect=TransportError("refused"))
    with pytest.raises(TransportError, match="refused"):
        handle_of(registry, factory)
    assert registry.receivers() == []
    factory.fail_connect = None
    handle = handle_of(registry, factory)  # tries again, with a new receiver
    assert len(factory.made) == 2 and handle.counters["connections_opened"] == 1


def test_trace_events_reach_every_attached_context_and_a_joiner_is_told(
    registry: _Registry,
) -> None:
    factory = Factory()
    tracers = [Tracer() for _ in range(3)]
    records = [Recorder() for _ in tracers]
    for tracer, record in zip(tracers, records, strict=True):
        tracer.add_listener(record)
    first = handle_of(registry, factory, tracer=tracers[0])
    second = handle_of(registry, factory, tracer=tracers[1])
    assert records[0].kinds() == ["mail.connected"]
    assert records[1].kinds() == ["mail.shared_attached"]
    assert records[1].events[0].extra["contexts"] == 2
    second.close()
    handle_of(registry, factory, tracer=tracers[2])
    factory.made[0].tracer.event(MailKind.DISCONNECTED, detail="gone")
    assert records[0].kinds()[-1] == records[2].kinds()[-1] == "mail.disconnected"
    assert "mail.disconnected" not in records[1].kinds()  # closed before it happened
    assert first.shared.attached == 2


def test_a_receive_failure_is_raised_in_the_driving_context_then_mail_goes_on(
    registry: _Registry,
) -> None:
    factory = Factory()
    first, second = handle_of(registry, factory), handle_of(registry, factory)
    fake = factory.made[0]
    fake.inbox.put(RuntimeError("server spoke nonsense"))
    fake.feed("after")
    with pytest.raises(RuntimeError, match="nonsense"):
        first.receive(WAIT_S)  # as a receiver of its own would raise it
    assert bodies(second, 1) == ["after"] and bodies(first, 1) == ["after"]


def test_a_context_busy_elsewhere_does_not_hold_up_the_others(registry: _Registry) -> None:
    factory = Factory()
    busy, reader = handle_of(registry, factory), handle_of(registry, factory)
    fake = factory.made[0]
    fake.feed("a")
    assert bodies(busy, 1) == ["a"]  # busy fetched it, and then stops receiving
    fake.feed("b")
    assert bodies(reader, 2) == ["a", "b"]  # reader drives in its turn
    assert bodies(busy, 1) == ["b"]  # kept for busy meanwhile


def test_closing_the_driving_context_hands_the_connection_on(registry: _Registry) -> None:
    factory = Factory()
    driver, waiter = handle_of(registry, factory), handle_of(registry, factory)
    shared = driver.shared
    outcome: list[object] = []

    def drive() -> None:
        try:
            outcome.append(driver.receive(WAIT_S * 4))
        except TransportError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=drive)
    thread.start()
    eventually(lambda: shared.driver is driver, WAIT_S)
    got: list[list[Inbound]] = []
    other = threading.Thread(target=lambda: got.append(waiter.receive(WAIT_S * 4)))
    other.start()
    driver.close()
    thread.join(WAIT_S)
    assert not thread.is_alive() and isinstance(outcome[0], TransportError)
    eventually(lambda: shared.driver is waiter, WAIT_S)
    factory.made[0].feed("c")
    other.join(WAIT_S)
    assert [[i.data for i in items] for items in got] == [[b"c"]]
    assert factory.made[0].closed == 0


def test_contexts_attach_and_close_from_many_threads(registry: _Registry) -> None:
    factory = Factory()
    keeper = handle_of(registry, factory)
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for _ in range(50):
                handle_of(registry, factory).close()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(factory.made) == 1 and keeper.shared.attached == 1  # the keeper held it
    keeper.close()
    assert factory.made[0].closed == 1

    def last_closes_race() -> None:
        pair = [handle_of(registry, factory) for _ in range(2)]
        closers = [threading.Thread(target=h.close) for h in pair]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(WAIT_S)

    for _ in range(20):
        last_closes_race()
    assert all(fake.closed == 1 for fake in factory.made)
    assert registry.receivers() == []


def test_a_forked_child_does_not_join_its_parents_receiver(registry: _Registry) -> None:
    factory = Factory()
    parent = handle_of(registry, factory)
    registry.after_fork()  # what os.register_at_fork runs in the child
    child = handle_of(registry, factory)
    assert len(factory.made) == 2 and child.shared is not parent.shared
    parent.close()  # the registry no longer knows it
    assert factory.made[0].closed == 1


# -- configuration -----------------------------------------------------------------------------
def _section(mail: dict[str, Any]) -> dict[str, Any]:
    raw = {"transport": "email", "url-imap": "imaps://h", "url-smtp": "smtps://h", "mail": mail}
    raw |= {"username": "u@h", "password": "p"}
    return mail_section(options_from_mapping(raw, {}))


@pytest.mark.parametrize(
    ("mail", "message"),
    [
        ({"share": "host"}, "expected one of process, none"),
        ({"share": "process", "routing": "sieve"}, 'only with routing = "inbox"'),
        ({"share": "process", "start-uid": 1}, "not with start-uid"),
    ],
)
def test_share_settings_that_cannot_be_had_are_refused(mail: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _section(mail)


def test_share_none_and_routed_and_start_uid_are_accepted() -> None:
    assert _section({"share": "none", "routing": "sieve"})["share"] == "none"
    assert _section({"start-uid": 1}) == {"start-uid": 1}  # default share: its own receiver
    assert _section({"share": "none", "start-uid": 1})["share"] == "none"


def test_routed_mode_and_start_uid_get_a_receiver_of_their_own() -> None:
    settings = ImapSettings("imap://127.0.0.1:1", "u", "secret")
    routed = _receiver({"routing": "sieve"}, settings, Tracer(), Routes(("a/b",)))
    assert isinstance(routed, RoutedImapReceiver)
    assert type(_receiver({"start-uid": 1}, settings, Tracer(), None, start_uid=1)) is ImapReceiver
    assert type(_receiver({"share": "none"}, settings, Tracer(), None)) is ImapReceiver
    shared = _receiver({}, settings, Tracer(), None, period_s=0.01)
    assert isinstance(shared, SharedReceiverHandle)
    assert shared.key == ShareKey(settings, (("period_s", 0.01),))  # nothing connected yet
    shared.close()


# -- the real stack ----------------------------------------------------------------------------
def take(sub: Subscription, count: int) -> list[str]:
    got: list[str] = []

    def more() -> bool:
        message = mailbus.wait_for_message(sub, 0.2)
        if message is not None:
            got.append(message.body)
        return len(got) >= count

    eventually(more, WAIT_S, f"{count} messages on {sub.topic}")
    return got


def init(ctx: mailbus.Context, errors: list[BaseException]) -> None:
    try:
        ctx.init()
    except BaseException as exc:  # reported by the test's assertion
        errors.append(exc)


@pytest.mark.mailstack
def test_more_contexts_than_the_connection_limit_share_one_login_and_each_gets_all(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    count = MAX_USERIP_CONNECTIONS + 2
    records = [Recorder() for _ in range(count)]
    contexts: list[mailbus.Context] = []
    held: list[imapclient.IMAPClient] = []
    try:
        for record in records:
            contexts.append(mailbus.Context(options_for(user)))
            contexts[-1].tracer.add_listener(record)
        # Made from as many threads at once: they race to the one login.
        errors: list[BaseException] = []
        threads = [threading.Thread(target=partial(init, ctx, errors)) for ctx in contexts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S * 2)
        assert not errors and not any(t.is_alive() for t in threads)
        first = next(i for i, r in enumerate(records) if "mail.connected" in r.kinds())
        contexts.insert(0, contexts.pop(first))  # the one that logged in comes first
        records.insert(0, records.pop(first))
        receivers: list[Any] = [ctx.transport.receiver for ctx in contexts]
        assert all(isinstance(r, SharedReceiverHandle) for r in receivers)
        shared: SharedImapReceiver = receivers[0].shared
        assert all(r.shared is shared for r in receivers) and shared.attached == count
        assert shared.imap.counters["connections_opened"] == 1
        assert records[0].kinds().count("mail.connected") == 1
        assert all("mail.connected" not in r.kinds() for r in records[1:])
        assert all("mail.shared_attached" in r.kinds() for r in records[1:])
        # The server agrees: all but one of the account's connections are still free.
        for _ in range(MAX_USERIP_CONNECTIONS - 1):
            client = imapclient.IMAPClient(HOST, port=mail_stack.imap_port, ssl=False, timeout=30)
            client.login(user.address, user.password)
            held.append(client)
        for client in held:
            client.logout()
        held.clear()

        subs = [ctx.subscription("shared/topic", depth=100) for ctx in contexts]
        publisher = contexts[-1].publisher("shared/topic")
        sent = [f"m{i}" for i in range(5)]
        for body in sent:
            publisher.publish(body)
        for sub in subs:
            assert sorted(take(sub, len(sent))) == sent
        # Bodies were fetched once, not once per context.
        assert shared.imap.counters["fetched"] == len(sent)

        # Closing contexts - the one that logged in among them - stops no one else's mail.
        for ctx in contexts[:3]:
            ctx.shutdown()
        assert shared.attached == count - 3
        publisher.publish("after")
        for sub in subs[3:]:
            assert take(sub, 1) == ["after"]
        for sub in subs[3:]:
            assert mailbus.wait_for_message(sub, 0.3) is None  # nothing twice
        assert all(ctx.counters.get("duplicates", 0) == 0 for ctx in contexts)
    finally:
        for client in held:
            client.logout()
        for ctx in contexts:
            ctx.shutdown()
    assert shared.attached == 0
    assert shared.imap._client is None  # the last one logged out


@pytest.mark.mailstack
def test_share_none_past_the_limit_is_refused_as_a_connection_limit(
    user: User, options_for: OptionsFactory
) -> None:
    own = options_for(user, mail={"share": "none", "reconnect-max-s": 0.5})
    contexts: list[mailbus.Context] = []
    try:
        for _ in range(MAX_USERIP_CONNECTIONS):
            contexts.append(mailbus.Context(own).init())
        assert all(isinstance(c.transport.receiver, ImapReceiver) for c in contexts)
        with pytest.raises(MailConnectionLimitError, match="mail_max_userip_connections"):
            mailbus.Context(own).init()
    finally:
        for ctx in contexts:
            ctx.shutdown()


@pytest.mark.mailstack
def test_after_a_lost_connection_every_context_keeps_receiving(
    mail_stack: MailStack, user: User, options_for: OptionsFactory
) -> None:
    contexts = [mailbus.Context(options_for(user)).init() for _ in range(3)]
    try:
        subs = [ctx.subscription("back", depth=10) for ctx in contexts]
        receiver: Any = contexts[0].transport.receiver
        counters = receiver.counters
        try:
            mail_stack.stop_imap()
            eventually(lambda: counters["disconnects"] >= 1, WAIT_S)
        finally:
            mail_stack.start_imap()
        eventually(lambda: counters["connections_opened"] >= 2, WAIT_S)
        contexts[1].publisher("back").publish("again")
        for sub in subs:
            assert take(sub, 1) == ["again"]
        assert counters["connections_opened"] == 2  # still one connection for all
    finally:
        for ctx in contexts:
            ctx.shutdown()

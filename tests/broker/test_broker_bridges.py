"""The bridge modules between the broker and Mailbus topics, on an in-process Context."""

from __future__ import annotations

import json
from collections.abc import Iterator

import mailbus
import pytest
from broker_helpers import Recorder, Source, kinds, wait_until
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus import headers as H
from mailbus.broker import Broker, BrokerMessage, Gateway, GatewayConfigError, WireFormatError
from mailbus.broker.bridges import (
    BRIDGE_REJECTED,
    BridgeFormatError,
    FromTopic,
    ToTopic,
    email_to_message,
    message_to_email,
)
from mailbus.broker.kinds import BrokerKind
from mailbus.email_message import MAX_PLAIN_HEADER_LENGTH, Email
from mailbus.trace import TraceEvent

TO_TOPIC = "mailbus.broker.bridges:ToTopic"
FROM_TOPIC = "mailbus.broker.bridges:FromTopic"


@pytest.fixture
def ctx() -> Iterator[mailbus.Context]:
    with mailbus.Context() as context:
        yield context


@pytest.fixture
def events(ctx: mailbus.Context) -> list[TraceEvent]:
    recorded: list[TraceEvent] = []
    ctx.tracer.add_listener(recorded.append)
    return recorded


@pytest.fixture
def bbroker(ctx: mailbus.Context) -> Iterator[Broker]:
    broker = Broker.create(tracer=ctx.tracer, context=ctx)
    yield broker
    broker.dec_ref()


keys = st.text(
    alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1
)
values = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)))


@given(st.binary(max_size=200), st.dictionaries(keys, values, max_size=4))
@settings(max_examples=100, deadline=None)
def test_wire_encoding_carries_any_message(content: bytes, properties: dict[str, str]) -> None:
    message = BrokerMessage(content, properties)
    body, headers = message_to_email(message, "wire")
    assert body.isascii()
    assert email_to_message(body, headers, "wire") == message


@given(st.text(), st.dictionaries(keys, values, max_size=4))
@settings(max_examples=100, deadline=None)
def test_text_encoding_round_trips_text(text: str, properties: dict[str, str]) -> None:
    message = BrokerMessage(text.encode("utf-8", errors="surrogatepass"), properties)
    header = json.dumps(properties, ensure_ascii=True, separators=(",", ":"))
    try:
        body, headers = message_to_email(message, "text")
    except BridgeFormatError as exc:
        if "not UTF-8" in str(exc):
            assert any(0xD800 <= ord(c) <= 0xDFFF for c in text)  # lone surrogates only
        else:
            assert len(header) > MAX_PLAIN_HEADER_LENGTH
        return
    assert body == text
    assert all(v.isascii() and "\n" not in v for v in headers.values())
    assert email_to_message(body, headers, "text") == message


def test_text_encoding_refuses_binary_content() -> None:
    with pytest.raises(BridgeFormatError, match=r"not UTF-8.*wire"):
        message_to_email(BrokerMessage(b"\xff\xfe"), "text")


@pytest.mark.parametrize(
    ("body", "headers", "encoding", "error", "problem"),
    [
        ("x", {}, "wire", BridgeFormatError, "expected header Broker-Encoding"),
        ("***", {"Broker-Encoding": "a160-base64"}, "wire", BridgeFormatError, "not base64"),
        ("AAAA", {"broker-encoding": "a160-base64"}, "wire", WireFormatError, "too short"),
        ("x", {"Broker-Properties": "{"}, "text", BridgeFormatError, "not JSON"),
        ("x", {"Broker-Properties": "[1]"}, "text", BridgeFormatError, "object of strings"),
        ("x", {"Broker-Properties": '{"a": 1}'}, "text", BridgeFormatError, "object of strings"),
        ("x", {"Broker-Properties": '{"a\\u0000": "b"}'}, "text", BridgeFormatError, "NUL"),
    ],
)
def test_bad_emails_are_refused(
    body: str, headers: dict[str, str], encoding: str, error: type, problem: str
) -> None:
    with pytest.raises(error, match=problem):
        email_to_message(body, headers, encoding)


@pytest.mark.parametrize("encoding", ["text", "wire"])
def test_broker_to_topic_to_broker(ctx: mailbus.Context, bbroker: Broker, encoding: str) -> None:
    """source -> ToTopic ==(Mailbus topic)==> FromTopic -> sink, and a plain Mailbus
    subscriber on the topic sees the messages too."""
    watcher = ctx.subscription("plant/readings")
    source, sink = Source(), Recorder()
    bbroker.add_module("source", source)
    bbroker.add_module("out", ToTopic(bbroker, {"topic": "plant/readings", "encoding": encoding}))
    bbroker.add_module("in", FromTopic(bbroker, {"topic": "plant/readings", "encoding": encoding}))
    bbroker.add_module("sink", sink)
    bbroker.add_link("source", "out")
    bbroker.add_link("in", "sink")
    bbroker.start_module("in")
    sent = [BrokerMessage(f"reading {n}", {"unit": "°C", "n": str(n)}) for n in range(20)]
    for message in sent:
        bbroker.publish(source, message)
    assert wait_until(lambda: len(sink.messages) == 20)
    for original, arrived in zip(sent, sink.messages, strict=True):
        assert arrived.content == original.content
        assert {k: v for k, v in arrived.properties.items() if not k.startswith("mailbus.")} == (
            dict(original.properties)
        )
        assert arrived.properties["mailbus.topic"] == "plant/readings"
        assert arrived.properties["mailbus.message_id"].startswith("<")
    first = mailbus.wait_for_message(watcher, 5.0)
    assert first is not None
    if encoding == "text":
        assert first.body == "reading 0"
        assert first.email.headers["Broker-Properties"] == '{"unit":"\\u00b0C","n":"0"}'
    bridge = bbroker.module("in")
    assert isinstance(bridge, FromTopic)
    assert (bridge.forwarded, bridge.rejected, bridge.failed) == (20, 0, 0)


def test_to_topic_with_binary_content_in_text_mode_fails_loudly(
    ctx: mailbus.Context, bbroker: Broker, events: list[TraceEvent]
) -> None:
    watcher = ctx.subscription("t")
    source = Source()
    bbroker.add_module("source", source)
    bbroker.add_module("out", ToTopic(bbroker, {"topic": "t"}))
    bbroker.add_link(source, "out")
    bbroker.publish(source, BrokerMessage(b"\xff"))
    bbroker.publish(source, BrokerMessage(b"fine"))
    assert wait_until(lambda: bbroker.snapshot().module("out").delivered == 1)
    assert bbroker.snapshot().module("out").failed == 1
    failed = kinds(events, BrokerKind.MODULE_FAILED)
    assert failed[0].name == "out" and "not UTF-8" in failed[0].detail
    message = mailbus.wait_for_message(watcher, 5.0)
    assert message is not None and message.body == "fine"


def test_from_topic_rejects_bad_emails_counted_and_traced(
    ctx: mailbus.Context, bbroker: Broker, events: list[TraceEvent]
) -> None:
    sink = Recorder()
    bridge = FromTopic(bbroker, {"topic": "w", "encoding": "wire", "annotate": False})
    bbroker.add_module("in", bridge)
    bbroker.add_module("sink", sink)
    bbroker.add_link("in", "sink")
    bbroker.start_module("in")
    publisher = ctx.publisher("w")
    publisher.publish("not base64 at all!", {"Broker-Encoding": "a160-base64"})
    good_body, good_headers = message_to_email(BrokerMessage(b"ok", {"k": "v"}), "wire")
    publisher.publish(good_body, good_headers)
    assert wait_until(lambda: len(sink.messages) == 1)
    assert sink.messages[0] == BrokerMessage(b"ok", {"k": "v"})
    assert bridge.rejected == 1
    rejected = kinds(events, BRIDGE_REJECTED)
    assert len(rejected) == 1 and "not base64" in rejected[0].detail


def poisoned_email(ctx: mailbus.Context, topic: str, body: str, **headers: str) -> Email:
    """A topic email whose publisher GID header decodes to a NUL: it opens as a topic
    message, but the property `mailbus.publisher_gid` cannot hold it."""
    return Email(
        subject=topic,
        body=body,
        sender=ctx.address,
        to=ctx.recipients.to,
        headers={**headers, H.SOURCE_TIMESTAMP: "1", H.PUBLISHER_GID: "gid\0poison"},
        message_id="<poison@test>",
    )


@pytest.mark.parametrize("encoding", ["text", "wire"])
def test_from_topic_survives_metadata_that_is_no_property(
    ctx: mailbus.Context, bbroker: Broker, events: list[TraceEvent], encoding: str
) -> None:
    sink = Recorder()
    bridge = FromTopic(bbroker, {"topic": "poison", "encoding": encoding})
    bbroker.add_module("in", bridge)
    bbroker.add_module("sink", sink)
    bbroker.add_link("in", "sink")
    bbroker.start_module("in")
    body, headers = message_to_email(BrokerMessage(b"bad", {"k": "v"}), encoding)
    # As it would arrive from a sender that does not validate: past send()'s check.
    ctx.sender.deliver(poisoned_email(ctx, "poison", body, **headers))
    good_body, good_headers = message_to_email(BrokerMessage(b"good", {"k": "v"}), encoding)
    ctx.publisher("poison").publish(good_body, good_headers)
    assert wait_until(lambda: len(sink.messages) == 1)
    assert sink.messages[0].content == b"good"
    assert (bridge.forwarded, bridge.rejected, bridge.failed) == (1, 1, 0)
    rejected = kinds(events, BRIDGE_REJECTED)
    assert len(rejected) == 1 and "NUL" in rejected[0].detail
    assert rejected[0].message_id == "<poison@test>"
    assert bridge._thread is not None and bridge._thread.is_alive()


def test_from_topic_survives_an_unexpected_error_on_one_message(
    ctx: mailbus.Context,
    bbroker: Broker,
    events: list[TraceEvent],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = Recorder()
    bridge = FromTopic(bbroker, {"topic": "flaky"})
    bbroker.add_module("in", bridge)
    bbroker.add_module("sink", sink)
    bbroker.add_link("in", "sink")
    real_publish = bbroker.publish
    calls = []

    def publish_failing_once(module: object, message: BrokerMessage) -> None:
        calls.append(message)
        if len(calls) == 1:
            raise RuntimeError("boom")  # not a MailbusError: nothing expects it
        real_publish(module, message)

    monkeypatch.setattr(bbroker, "publish", publish_failing_once)
    bbroker.start_module("in")
    publisher = ctx.publisher("flaky")
    publisher.publish("first")
    publisher.publish("second")
    assert wait_until(lambda: len(sink.messages) == 1)
    assert sink.messages[0].content == b"second"
    assert (bridge.forwarded, bridge.rejected, bridge.failed) == (1, 0, 1)
    rejected = kinds(events, BRIDGE_REJECTED)
    assert len(rejected) == 1 and "boom" in rejected[0].detail
    assert bridge._thread is not None and bridge._thread.is_alive()


def test_from_topic_is_a_source_only(
    ctx: mailbus.Context, bbroker: Broker, events: list[TraceEvent]
) -> None:
    source = Source()
    bbroker.add_module("source", source)
    bbroker.add_module("in", FromTopic(bbroker, {"topic": "x"}))
    bbroker.add_link("source", "in")
    bbroker.publish(source, BrokerMessage(b"misrouted"))
    assert wait_until(lambda: len(kinds(events, BrokerKind.MODULE_FAILED)) == 1)
    assert "is a source" in kinds(events, BrokerKind.MODULE_FAILED)[0].detail
    assert bbroker.snapshot().module("in").failed == 1


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (None, "args must be an object"),
        ({}, "'topic'"),
        ({"topic": "t", "encoding": "xml"}, "encoding 'xml'"),
        ({"topic": "t", "colour": "red"}, "unknown arg 'colour'"),
        ({"topic": "t", "depth": 0}, "'depth'"),
        ({"topic": "t", "annotate": "yes"}, "'annotate'"),
    ],
)
def test_bridge_arguments_are_checked(bbroker: Broker, args: object, problem: str) -> None:
    with pytest.raises(GatewayConfigError, match=problem):
        FromTopic(bbroker, args)


def test_bridges_need_a_context() -> None:
    with Broker.create() as broker, pytest.raises(GatewayConfigError, match="mailbus Context"):
        ToTopic(broker, {"topic": "t"})


def test_bridges_in_a_gateway(ctx: mailbus.Context) -> None:
    gateway = Gateway.from_dict(
        {
            "modules": [
                {"name": "in", "loader": FROM_TOPIC, "args": {"topic": "a"}},
                {"name": "out", "loader": TO_TOPIC, "args": {"topic": "b"}},
            ],
            "links": [{"source": "in", "sink": "out"}],
        },
        context=ctx,
        tracer=ctx.tracer,
    )
    watcher = ctx.subscription("b")
    with gateway:
        ctx.publisher("a").publish("relayed")
        message = mailbus.wait_for_message(watcher, 5.0)
        assert message is not None and message.body == "relayed"
        assert "mailbus.topic" in message.email.headers["Broker-Properties"]


def test_properties_too_long_for_a_header_fail_loudly_in_text_mode(
    ctx: mailbus.Context, bbroker: Broker, events: list[TraceEvent]
) -> None:
    watcher = ctx.subscription("big")
    source = Source()
    bbroker.add_module("source", source)
    bbroker.add_module("text", ToTopic(bbroker, {"topic": "big"}))
    bbroker.add_module("wire", ToTopic(bbroker, {"topic": "big", "encoding": "wire"}))
    bbroker.add_link(source, "text")
    bbroker.add_link(source, "wire")
    bbroker.publish(source, BrokerMessage(b"payload", {"blob": "x" * 2000}))
    assert wait_until(lambda: len(kinds(events, BrokerKind.MODULE_FAILED)) == 1)
    assert "use the 'wire' encoding" in kinds(events, BrokerKind.MODULE_FAILED)[0].detail
    assert bbroker.snapshot().module("text").failed == 1
    # The wire encoding carries it in the body: it arrives whole.
    arrived = mailbus.wait_for_message(watcher, 5.0)
    assert arrived is not None
    assert email_to_message(arrived.body, arrived.email.headers, "wire").properties == {
        "blob": "x" * 2000
    }

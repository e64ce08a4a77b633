"""The envelope's kind is a type, and routing hands envelopes over through the entities'
public `deliver` (the `Recipient` protocol)."""

from __future__ import annotations

import threading

import mailbus
from mailbus import Kind
from mailbus.envelope import EnvelopeKind, Message, Recipient, Request, Response, open_envelope
from mailbus.routing import SubscriptionHandler
from mailbus.trace import TraceEvent


def test_each_envelope_class_has_its_kind() -> None:
    assert [c.kind for c in (Message, Request, Response)] == list(EnvelopeKind)
    assert [k.value for k in EnvelopeKind] == ["message", "request", "response"]


def _exchange(ctx: mailbus.Context) -> Response:
    """One request answered by a server on a thread; the response the call returns."""
    server = ctx.server("math/add")

    def serve() -> None:
        request = mailbus.wait_for_request(server, timeout=5.0)
        assert request is not None and request.kind is EnvelopeKind.REQUEST
        server.send_response(request, "3")

    thread = threading.Thread(target=serve)
    thread.start()
    response = ctx.client("math/add").call("1 2", timeout=5.0)
    thread.join(timeout=5.0)
    return response


def test_the_received_event_carries_the_kind_of_what_arrived(ctx: mailbus.Context) -> None:
    events: list[TraceEvent] = []
    ctx.tracer.add_listener(events.append)
    subscription = ctx.subscription("t")
    ctx.publisher("t").publish("x")
    message = mailbus.wait_for_message(subscription, 1.0)
    assert message is not None and message.kind is EnvelopeKind.MESSAGE
    assert _exchange(ctx).kind is EnvelopeKind.RESPONSE
    received = [e.detail for e in events if e.kind == Kind.RECEIVED.value]
    assert sorted(received) == ["message", "request", "response"]
    assert {type(detail) for detail in received} == {str}  # plain text when recorded


def test_entities_are_recipients_that_say_whether_they_took_it(ctx: mailbus.Context) -> None:
    subscription = ctx.subscription("t")
    recipient: Recipient[Message] = subscription
    email = ctx.outgoing("t", "b", {"Source-Timestamp": "1", "Publisher-GID": "g"})
    message = open_envelope(email, 2)
    assert isinstance(message, Message)
    handler = SubscriptionHandler()
    handler.subscriptions.add("t", subscription)
    assert handler.handle(message) == 1
    assert subscription.take() is message
    subscription.close()
    assert recipient.deliver(message) is False
    assert handler.handle(message) == 0  # closed: not taken, and nothing queued
    assert subscription.take() is None


def test_a_response_no_call_awaits_is_refused_and_counted(ctx: mailbus.Context) -> None:
    response = _exchange(ctx)
    client = ctx.client("math/add")
    recipient: Recipient[Response] = client
    assert recipient.deliver(response) is False
    assert client.discarded == 1

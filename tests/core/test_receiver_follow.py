"""The context tells its receiver what it receives (EmailReceiver.follow), so a receiver
that can read only that (the email transport's routed mode) knows what to read."""

from __future__ import annotations

import mailbus
from mailbus.inprocess import InProcessReceiver, InProcessSender
from mailbus.transport import Transport

Interest = tuple[frozenset[str], frozenset[str], frozenset[str]]


class Following(InProcessReceiver):
    def __init__(self) -> None:
        super().__init__()
        self.told: list[Interest] = []

    def follow(
        self, topics: frozenset[str], services: frozenset[str], clients: frozenset[str]
    ) -> None:
        self.told.append((topics, services, clients))


def test_subscriptions_servers_and_clients_are_told_as_they_come_and_go() -> None:
    receiver = Following()
    with mailbus.Context(transport=Transport(InProcessSender(receiver), receiver)) as ctx:
        sub = ctx.subscription("a")
        server = ctx.server("add")
        client = ctx.client("mul")
        assert receiver.told[-1] == ({"a"}, {"add"}, {"mul"})
        sub.close()
        server.close()
        assert receiver.told[-1] == (set(), set(), {"mul"})
        client.close()
        assert receiver.told[-1] == (frozenset(), frozenset(), frozenset())
        # Messages still flow as before (follow is advice, not a filter).
        again = ctx.subscription("b")
        ctx.publisher("b").publish("x")
        message = mailbus.wait_for_message(again, 5.0)
        assert message is not None and message.body == "x"

"""A small broker beside the embedded demo, so that the Broker screen has something to
show: two bridges from demo topics into a broker and a module that tallies them."""

from __future__ import annotations

from mailbus.broker import Broker, BrokerMessage
from mailbus.broker.bridges import FromTopic
from mailbus.context import Context


class Tally:
    """Counts what it receives and keeps only the last message (bounded memory)."""

    def __init__(self) -> None:
        self.count = 0
        self.last = b""

    def receive(self, message: BrokerMessage) -> None:
        self.count += 1
        self.last = message.content

    def destroy(self) -> None:
        pass


def start_demo_broker(context: Context) -> Broker:
    broker = Broker.create(context=context, trace_messages=False)
    bridges = [FromTopic(broker, {"topic": t}) for t in ("robot/pose", "robot/log")]
    for bridge in bridges:
        broker.add_module(f"from {bridge.topic}", bridge)
    broker.add_module("tally", Tally(), capacity=1000)
    broker.add_link("*", "tally")
    for bridge in bridges:
        broker.start_module(bridge)
    return broker


def stop_demo_broker(broker: Broker) -> None:
    for stats in broker.snapshot().modules:
        broker.remove_module(stats.name, drain=False, timeout=2.0)
    broker.dec_ref()

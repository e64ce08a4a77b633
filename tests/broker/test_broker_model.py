"""Routing against a model: random sequences of module, link and publish operations
(wildcard included) must deliver exactly what a plain dictionary model predicts."""

from __future__ import annotations

from broker_helpers import Recorder
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from mailbus.broker import Broker, BrokerMessage, LinkError, UnknownModuleError

NAMES = ("a", "b", "c", "d")


class RoutingModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.broker = Broker.create()
        self.modules: dict[str, Recorder] = {}
        self.links: set[tuple[str, str]] = set()
        self.expected: dict[str, list[bytes]] = {}
        self.sent = 0

    def sinks_of(self, source: str) -> set[str]:
        return {
            sink for (src, sink) in self.links if src == source or (src == "*" and sink != source)
        }

    @rule(name=st.sampled_from(NAMES))
    def add_module(self, name: str) -> None:
        if name in self.modules:
            return
        module = Recorder()
        self.broker.add_module(name, module)
        self.modules[name] = module
        self.expected[name] = []

    @rule(name=st.sampled_from(NAMES))
    def remove_module(self, name: str) -> None:
        if name not in self.modules:
            try:
                self.broker.remove_module(name)
            except UnknownModuleError:
                return
            raise AssertionError(f"removed unknown module {name}")
        self.broker.remove_module(name)
        module = self.modules.pop(name)
        assert module.contents == self.expected.pop(name)  # drained before destroy
        assert module.destroyed == 1
        self.links = {(s, k) for (s, k) in self.links if name not in (s, k)}

    @rule(source=st.sampled_from((*NAMES, "*")), sink=st.sampled_from(NAMES))
    def add_link(self, source: str, sink: str) -> None:
        valid = (
            sink in self.modules
            and (source == "*" or source in self.modules)
            and source != sink
            and (source, sink) not in self.links
            and not (source != "*" and ("*", sink) in self.links)
            and not (source == "*" and any(k == sink for _, k in self.links))
        )
        try:
            self.broker.add_link(source, sink)
        except (LinkError, UnknownModuleError):
            assert not valid, f"refused a valid link {source} -> {sink}"
            return
        assert valid, f"accepted an invalid link {source} -> {sink}"
        self.links.add((source, sink))

    @precondition(lambda self: bool(self.links))
    @rule(data=st.data())
    def remove_link(self, data: st.DataObject) -> None:
        link = data.draw(st.sampled_from(sorted(self.links)))
        self.broker.remove_link(*link)
        self.links.discard(link)

    @precondition(lambda self: bool(self.modules))
    @rule(data=st.data())
    def publish(self, data: st.DataObject) -> None:
        source = data.draw(st.sampled_from(sorted(self.modules)))
        self.sent += 1
        content = f"{source}:{self.sent}".encode()
        sinks = self.sinks_of(source)
        assert self.broker.publish(source, BrokerMessage(content)) == len(sinks)
        for sink in sinks:
            self.expected[sink].append(content)

    @invariant()
    def delivered_as_modelled(self) -> None:
        assert self.broker.wait_idle(10)
        for name, module in self.modules.items():
            assert module.contents == self.expected[name]
            assert module.overlaps == 0
        got = {(x.source, x.sink) for x in self.broker.links()}
        assert got == self.links

    def teardown(self) -> None:
        for name in list(self.modules):
            self.broker.remove_module(name)
        self.broker.dec_ref()


TestRouting = RoutingModel.TestCase
TestRouting.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)

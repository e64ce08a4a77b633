"""The module broker: modules linked source -> sink, serial delivery per module,
bounded queues with back-pressure instead of silent loss, and JSON-described gateways.

    from mailbus.broker import Broker, BrokerMessage
    with Broker.create() as broker:
        broker.add_module("a", source_module)
        broker.add_module("b", sink_module)
        broker.add_link("a", "b")
        broker.publish(source_module, BrokerMessage(b"hello", {"kind": "greeting"}))

See docs/broker.md.
"""

from mailbus.broker.broker import Broker
from mailbus.broker.errors import (
    BrokerClosedError,
    BrokerError,
    DuplicateModuleError,
    GatewayConfigError,
    LinkError,
    ModuleStartError,
    PublishTimeoutError,
    UnknownModuleError,
    WireFormatError,
)
from mailbus.broker.gateway import Gateway, GatewaySpec, LinkSpec, ModuleSpec, parse_gateway
from mailbus.broker.links import WILDCARD
from mailbus.broker.message import BrokerMessage
from mailbus.broker.module import Module
from mailbus.broker.policy import Backpressure, Overflow
from mailbus.broker.snapshot import BrokerSnapshot, LinkInfo, ModuleState, ModuleStats
from mailbus.broker.wire import decode, encode

__all__ = [
    "WILDCARD",
    "Backpressure",
    "Broker",
    "BrokerClosedError",
    "BrokerError",
    "BrokerMessage",
    "BrokerSnapshot",
    "DuplicateModuleError",
    "Gateway",
    "GatewayConfigError",
    "GatewaySpec",
    "LinkError",
    "LinkInfo",
    "LinkSpec",
    "Module",
    "ModuleSpec",
    "ModuleStartError",
    "ModuleState",
    "ModuleStats",
    "Overflow",
    "PublishTimeoutError",
    "UnknownModuleError",
    "WireFormatError",
    "decode",
    "encode",
    "parse_gateway",
]

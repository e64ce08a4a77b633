"""Mailbus: pub/sub topics and request/response services carried in emails.

import mailbus
with mailbus.Context() as ctx:            # in-process by default
    sub = ctx.subscription("sensors/temp")
    ctx.publisher("sensors/temp").publish('{"c": 21.5}')
    print(mailbus.wait_for_message(sub, timeout=1.0).body)
"""

from mailbus.context import Context, ContextState, default_context, init, shutdown
from mailbus.email_message import Email, from_bytes, to_bytes
from mailbus.envelope import Message, MessageInfo, Request, Response
from mailbus.errors import (
    ConfigError,
    ContextError,
    EmailFormatError,
    ForeignEmailError,
    InvalidNameError,
    MailbusError,
    ServiceTimeoutError,
    TransportError,
    WaitSetError,
)
from mailbus.guard_condition import GuardCondition
from mailbus.options import Options, Recipients, load_options
from mailbus.publisher import Publisher
from mailbus.service import ServiceClient, ServiceServer
from mailbus.subscription import OverflowPolicy, Subscription
from mailbus.trace import Kind, TraceEvent, Tracer
from mailbus.transport import EmailReceiver, EmailSender, RawEmail, Transport
from mailbus.waitset import (
    WaitResult,
    WaitSet,
    wait_for_message,
    wait_for_request,
    wait_for_response,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Context",
    "ContextError",
    "ContextState",
    "Email",
    "EmailFormatError",
    "EmailReceiver",
    "EmailSender",
    "ForeignEmailError",
    "GuardCondition",
    "InvalidNameError",
    "Kind",
    "MailbusError",
    "Message",
    "MessageInfo",
    "Options",
    "OverflowPolicy",
    "Publisher",
    "RawEmail",
    "Recipients",
    "Request",
    "Response",
    "ServiceClient",
    "ServiceServer",
    "ServiceTimeoutError",
    "Subscription",
    "TraceEvent",
    "Tracer",
    "Transport",
    "TransportError",
    "WaitResult",
    "WaitSet",
    "WaitSetError",
    "__version__",
    "default_context",
    "from_bytes",
    "init",
    "load_options",
    "shutdown",
    "to_bytes",
    "wait_for_message",
    "wait_for_request",
    "wait_for_response",
]

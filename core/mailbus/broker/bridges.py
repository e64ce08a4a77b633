"""Bridge modules between the broker and Mailbus topics (through the broker's Context).

`ToTopic` publishes every broker message it receives on a Mailbus topic; `FromTopic`
subscribes to a topic and publishes what arrives into the broker as itself. Args:

    {"topic": "plant/readings", "encoding": "text" | "wire"}     (both)
    {"depth": 10000, "annotate": true}                            (FromTopic only)

"text" (default) keeps the email readable: the body is the content as UTF-8 (content
that is not UTF-8 is refused, loudly) and the properties travel as JSON in the
`Broker-Properties` header. "wire" carries any message exactly: the body is the A1 60
wire bytes in base64, marked by `Broker-Encoding: a160-base64`. `annotate` adds the
properties `mailbus.topic`, `mailbus.message_id` and `mailbus.publisher_gid`.

An email the FromTopic bridge cannot turn into a message (bad body, bad properties, or
metadata such as a Message-ID that is no valid property) is counted (`rejected`), logged
and traced as `broker.bridge_rejected`; a publish into the broker that fails is counted
(`failed`), and so is any unexpected error on one message, which is also traced as
`broker.bridge_rejected`: the bridge thread goes on with the next message. Nothing is
dropped in silence.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mailbus.broker.errors import BrokerError, GatewayConfigError, WireFormatError
from mailbus.broker.kinds import BrokerKind
from mailbus.broker.message import BrokerMessage
from mailbus.broker.wire import decode, encode
from mailbus.email_message import MAX_PLAIN_HEADER_LENGTH
from mailbus.errors import MailbusError
from mailbus.subscription import OverflowPolicy

if TYPE_CHECKING:
    from mailbus.broker.broker import Broker
    from mailbus.context import Context
    from mailbus.envelope import Message as TopicMessage

log = logging.getLogger(__name__)

PROPERTIES_HEADER = "Broker-Properties"
ENCODING_HEADER = "Broker-Encoding"
WIRE_ENCODING = "a160-base64"
ENCODINGS = ("text", "wire")
BRIDGE_REJECTED = BrokerKind.BRIDGE_REJECTED


class BridgeFormatError(BrokerError, ValueError):
    """A message that cannot cross the bridge in the chosen encoding."""


# -- the pure conversions ---------------------------------------------------------------
def message_to_email(message: BrokerMessage, encoding: str) -> tuple[str, dict[str, str]]:
    """(body, extra headers) that carry `message` on a topic."""
    if encoding == "wire":
        body = base64.encodebytes(encode(message)).decode("ascii")
        return body, {ENCODING_HEADER: WIRE_ENCODING}
    try:
        body = message.content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BridgeFormatError(
            f"content is not UTF-8 (byte {exc.start}); use the 'wire' encoding for binary content"
        ) from None
    headers: dict[str, str] = {}
    if message.properties:
        # ensure_ascii: one line of printable ASCII, nothing a header could be injected by
        value = json.dumps(dict(message.properties), ensure_ascii=True, separators=(",", ":"))
        if len(value) > MAX_PLAIN_HEADER_LENGTH:
            # Refuse here, whatever the transport: a mail transport would refuse it later.
            raise BridgeFormatError(
                f"properties take {len(value)} characters as a header, more than "
                f"{MAX_PLAIN_HEADER_LENGTH}; use the 'wire' encoding for large properties"
            )
        headers[PROPERTIES_HEADER] = value
    return body, headers


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def email_to_message(body: str, headers: Mapping[str, str], encoding: str) -> BrokerMessage:
    """The broker message a topic's email carries (BridgeFormatError or WireFormatError)."""
    if encoding == "wire":
        marker = _header(headers, ENCODING_HEADER)
        if marker != WIRE_ENCODING:
            raise BridgeFormatError(
                f"expected header {ENCODING_HEADER}: {WIRE_ENCODING}, got {marker!r}"
            )
        try:
            data = base64.b64decode("".join(body.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BridgeFormatError(f"body is not base64: {exc}") from None
        return decode(data)
    raw = _header(headers, PROPERTIES_HEADER)
    properties: dict[str, str] = {}
    if raw is not None:
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise BridgeFormatError(f"{PROPERTIES_HEADER} is not JSON: {exc}") from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise BridgeFormatError(f"{PROPERTIES_HEADER} must be a JSON object of strings")
        properties = value
    try:
        return BrokerMessage(body.encode("utf-8"), properties)
    except (TypeError, ValueError) as exc:
        raise BridgeFormatError(str(exc)) from None


# -- argument handling ------------------------------------------------------------------
def _args(args: Any, what: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(args, dict):
        raise GatewayConfigError(what, "args must be an object with at least a 'topic'")
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise GatewayConfigError(
            what, f"unknown arg {unknown[0]!r} (allowed: {', '.join(allowed)})"
        )
    if not isinstance(args.get("topic"), str):
        raise GatewayConfigError(what, "'topic' (a string) is required")
    encoding = args.get("encoding", "text")
    if encoding not in ENCODINGS:
        raise GatewayConfigError(
            what, f"encoding {encoding!r} is not one of {', '.join(ENCODINGS)}"
        )
    return args


def _context(broker: Broker, what: str) -> Context:
    context = broker.context
    if context is None:
        raise GatewayConfigError(what, "needs a broker created with a mailbus Context")
    return context


class ToTopic:
    """Broker -> Mailbus: each received message is published on `topic`."""

    def __init__(self, broker: Broker, args: Any) -> None:
        args = _args(args, "to_topic", ("topic", "encoding"))
        self.encoding: str = args.get("encoding", "text")
        self.publisher = _context(broker, "to_topic").publisher(args["topic"])
        self.published = 0

    def receive(self, message: BrokerMessage) -> None:
        body, headers = message_to_email(message, self.encoding)
        self.publisher.publish(body, headers)
        self.published += 1

    def destroy(self) -> None:
        pass


class FromTopic:
    """Mailbus -> broker: messages on `topic` are published into the broker."""

    def __init__(self, broker: Broker, args: Any) -> None:
        args = _args(args, "from_topic", ("topic", "encoding", "depth", "annotate"))
        depth = args.get("depth", 10_000)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise GatewayConfigError("from_topic", "'depth' must be an integer >= 1")
        annotate = args.get("annotate", True)
        if not isinstance(annotate, bool):
            raise GatewayConfigError("from_topic", "'annotate' must be true or false")
        context = _context(broker, "from_topic")
        self.topic: str = args["topic"]
        self.encoding: str = args.get("encoding", "text")
        self.annotate = annotate
        self.forwarded = 0
        self.rejected = 0
        self.failed = 0
        self.abandoned = 0
        self._broker = broker
        self._subscription = context.subscription(
            self.topic, depth=depth, overflow=OverflowPolicy.DROP_NEWEST
        )
        self._stop = context.guard_condition(f"from_topic {self.topic} stop")
        self._wait_set = context.wait_set(f"broker bridge from {self.topic}")
        self._wait_set.add_subscription(self._subscription)
        self._wait_set.add_guard_condition(self._stop)
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        # Publishing starts only now, once the gateway's links exist.
        self._thread = threading.Thread(
            target=self._run, name=f"bridge-from-{self.topic}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping:
            self._wait_set.wait(-1)
            while not self._stopping:
                taken = self._subscription.take()
                if taken is None:
                    break
                try:
                    self._forward(taken)
                except Exception as exc:
                    # No single message may stop the bridge: report it and go on.
                    self.failed += 1
                    log.exception("bridge from %r: failed on %r", self.topic, taken.message_id)
                    self._report(taken, f"unexpected error: {exc!r}")

    def _forward(self, taken: TopicMessage) -> None:
        try:
            message = email_to_message(taken.body, taken.email.headers, self.encoding)
            if self.annotate:
                # The topic's metadata comes from the email too: a header decoded to a
                # NUL makes an invalid property, refused like any other bad email.
                message = message.with_properties(
                    **{
                        "mailbus.topic": taken.topic,
                        "mailbus.message_id": taken.message_id,
                        "mailbus.publisher_gid": taken.info.source_gid,
                    }
                )
        except (BridgeFormatError, WireFormatError, ValueError, TypeError) as exc:
            self.rejected += 1
            log.warning("bridge from %r: rejected %r: %s", self.topic, taken.message_id, exc)
            self._report(taken, str(exc))
            return
        try:
            self._broker.publish(self, message)
        except MailbusError as exc:  # PublishTimeoutError, a removed module, a closed broker
            self.failed += 1
            log.error("bridge from %r: could not publish %s: %s", self.topic, taken.message_id, exc)
            return
        self.forwarded += 1

    def _report(self, taken: TopicMessage, detail: str) -> None:
        tracer = self._broker.tracer
        if tracer is not None and tracer.active:
            tracer.event(
                BRIDGE_REJECTED, name=self.topic, message_id=taken.message_id, detail=detail
            )

    def receive(self, message: BrokerMessage) -> None:
        raise BridgeFormatError(
            f"the bridge from topic {self.topic!r} is a source; do not link into it"
        )

    def destroy(self) -> None:
        self._stopping = True
        self._stop.trigger()
        if self._thread is not None:
            self._thread.join(10.0)
        self._wait_set.close()
        self._subscription.close()
        self.abandoned = len(self._subscription)
        if self.abandoned:
            log.warning(
                "bridge from %r: removed with %d messages not forwarded", self.topic, self.abandoned
            )

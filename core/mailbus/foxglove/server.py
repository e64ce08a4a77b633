"""The thin I/O loop of `mailbus foxglove`: a `websockets` asyncio server on a thread of
its own, feeding the bridge (mailbus.foxglove.bridge) and carrying out its effects.

- The engine side is one trace listener on the context. It runs on the engine's
  thread, so it only decides (a set lookup) whether the bridge wants the event and, if
  so, appends it to an inbox; the loop is woken once per batch, not per message.
- Each client has a bounded send queue drained by its own writer task. A client that
  falls `send_queue` frames behind is cut off (closed with 1008 and counted): the loop
  never waits for one client, so neither the system nor the other clients slow down.
- Service calls and client publishes run on worker threads (they may wait on a server)
  and shows in traces as this participant's, like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from mailbus import presence
from mailbus.envelope import EnvelopeKind
from mailbus.errors import MailbusError
from mailbus.extras import needs_extra
from mailbus.foxglove import protocol as P
from mailbus.foxglove.bridge import Bridge, Call, Effect, Publish, Send
from mailbus.trace import Kind, TraceEvent

with needs_extra("mailbus foxglove", "foxglove"):
    from websockets.asyncio.server import Server, ServerConnection, serve
    from websockets.exceptions import ConnectionClosed
    from websockets.typing import Subprotocol

if TYPE_CHECKING:
    from mailbus.context import Context
    from mailbus.publisher import Publisher
    from mailbus.service import ServiceClient

log = logging.getLogger(__name__)

SEND_QUEUE = 4096  # frames a client may fall behind before it is cut off
# Events the engine may hand over before the loop takes them: past it, messages are
# dropped (counted, told to the clients) rather than memory grow or the engine wait.
INBOX_LIMIT = 100_000
CALL_TIMEOUT_S = 10.0
START_TIMEOUT_S = 10.0
TICK_S = 0.5
SIGNATURE_REASONS = frozenset({"unsigned", "bad_signature", "replayed", "replay_window_full"})
LocalService = Callable[[str], str]


class FoxgloveError(MailbusError):
    """The server could not start (the address is taken, the host unknown)."""


class _Client:
    """One connection's bounded send queue and the task that drains it."""

    __slots__ = ("connection", "cut", "frames", "id", "limit", "ready", "sent")

    def __init__(self, client_id: int, connection: ServerConnection, limit: int) -> None:
        self.id = client_id
        self.connection = connection
        self.limit = limit
        self.frames: deque[str | bytes] = deque()
        self.ready = asyncio.Event()
        self.cut = False
        self.sent = 0

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionClosed):  # the reading side sees it and cleans up
            while True:
                await self.ready.wait()
                self.ready.clear()
                frames = self.frames
                while frames:
                    await self.connection.send(frames.popleft())
                    self.sent += 1


class FoxgloveServer:
    """Serves `context`'s system to Foxglove clients at ws://host:port.

    `local_services` are answered here (name -> function of the request body returning
    the response body); the player's controls use them. `schemas`: JSON Schemas
    declared per topic, used instead of inferred ones. `notes` receives one line for
    what an operator should know (a client cut off)."""

    def __init__(
        self,
        context: Context,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        allow_calls: bool = False,
        allow_publish: bool = False,
        send_queue: int = SEND_QUEUE,
        local_services: Mapping[str, LocalService] | None = None,
        name: str = "mailbus",
        notes: Callable[[str], None] | None = None,
        schemas: Mapping[str, str] | None = None,
    ) -> None:
        if send_queue < 1:
            raise ValueError(f"send_queue must be at least 1, got {send_queue}")
        self.context = context
        self.host = host
        self.port = port
        self.send_queue = send_queue
        self.local_services = dict(local_services or {})
        self.notes = notes or log.warning
        self.bridge = Bridge(
            name=name,
            allow_calls=allow_calls,
            allow_publish=allow_publish,
            local_services=self.local_services,
            metadata={"transport": context.transport_name},
            schemas=schemas,
        )
        self.stats: dict[str, int] = {
            "clients": 0,
            "connected": 0,
            "cut_off": 0,
            "malformed_announcements": 0,
            "calls": 0,
            "published": 0,
            "dropped": 0,
        }
        self._clients: dict[int, _Client] = {}
        self._ids = itertools.count(1)
        self._inbox: list[TraceEvent] = []
        self._inbox_lock = threading.Lock()
        self._wake_pending = False
        self._dropped = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._remove_listener: Callable[[], None] | None = None
        self._calls = ThreadPoolExecutor(4, thread_name_prefix="foxglove-call")
        self._publishing = ThreadPoolExecutor(1, thread_name_prefix="foxglove-publish")
        self._entity_lock = threading.Lock()
        self._publishers: dict[str, Publisher] = {}
        self._service_clients: dict[str, ServiceClient] = {}
        self._skipped: dict[str, int] = {}
        self._closing: set[asyncio.Future[None]] = set()

    # -- life cycle ----------------------------------------------------------------------
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    def start(self) -> FoxgloveServer:
        """Listen (port 0: any free port, then `port` says which); FoxgloveError if not."""
        if self._thread is not None:
            raise RuntimeError("the Foxglove server is started already")
        self._thread = threading.Thread(target=self._run, name="foxglove-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise FoxgloveError(f"the Foxglove server did not start within {START_TIMEOUT_S} s")
        if self._failure is not None:
            self._thread.join(START_TIMEOUT_S)
            raise FoxgloveError(f"cannot serve on {self.url}: {self._failure}")
        self._remove_listener = self.context.tracer.add_listener(self._on_event)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(timeout)
        self._calls.shutdown(wait=False, cancel_futures=True)
        self._publishing.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> FoxgloveServer:
        return self.start()

    def _repr_html_(self) -> str:
        return (
            f"<p>Foxglove server at <code>{self.url}</code>: in Foxglove or Lichtblick, "
            "<i>Open connection</i> → <i>Foxglove WebSocket</i>.</p>"
        )

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start(); the thread ends either way
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server: Server = await serve(
            self._handle,
            self.host,
            self.port,
            subprotocols=[Subprotocol(s) for s in P.SUBPROTOCOLS],
            compression=None,  # the app does not ask for it; deflate would cost CPU per frame
            max_size=P.MAX_TEXT_FRAME * 4,
            close_timeout=2.0,
        )
        try:
            if self.port == 0:
                self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            ticker = asyncio.create_task(self._tick())
            await self._stopping.wait()
            ticker.cancel()
        finally:
            server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 3.0)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)  # the clock of expiries and status summaries
            self._dispatch(self.bridge.tick(time.monotonic()))
            self._flush_skipped()

    # -- clients -------------------------------------------------------------------------
    async def _handle(self, connection: ServerConnection) -> None:
        client = _Client(next(self._ids), connection, self.send_queue)
        self._clients[client.id] = client
        self.stats["clients"] = len(self._clients)
        self.stats["connected"] += 1
        writer = asyncio.create_task(client.drain())
        self._dispatch(self.bridge.connect(client.id))
        try:
            async for frame in connection:
                self._dispatch(self.bridge.on_frame(client.id, frame))
        except ConnectionClosed:
            pass
        finally:
            self.bridge.disconnect(client.id)
            self._clients.pop(client.id, None)
            self.stats["clients"] = len(self._clients)
            writer.cancel()

    def _cut_off(self, client: _Client) -> None:
        client.cut = True
        client.frames.clear()
        self.stats["cut_off"] += 1
        self.bridge.disconnect(client.id)
        self.notes(
            f"foxglove: client {client.id} cut off: {self.send_queue} frames behind "
            f"(sent {client.sent}); the system did not wait for it"
        )
        closing = asyncio.ensure_future(self._close_slow(client))
        self._closing.add(closing)  # held until done: the loop keeps only weak references
        closing.add_done_callback(self._closing.discard)

    async def _close_slow(self, client: _Client) -> None:
        try:
            await asyncio.wait_for(client.connection.close(1008, "too slow: send queue full"), 2.0)
        except (TimeoutError, ConnectionClosed):
            client.connection.transport.abort()

    def _dispatch(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                client = self._clients.get(effect.client)
                if client is None or client.cut:
                    continue
                if len(client.frames) >= client.limit:
                    self._cut_off(client)
                    continue
                client.frames.append(effect.frame)
                client.ready.set()
            elif isinstance(effect, Publish):
                self._publishing.submit(self._publish, effect)
            elif isinstance(effect, Call):
                if effect.local:
                    self._answer_local(effect)
                else:
                    self._calls.submit(self._call, effect)

    # -- the engine side (its thread) ------------------------------------------------------
    def _on_event(self, event: TraceEvent) -> None:
        kind = event.kind
        if kind == Kind.RECEIVED:
            name = event.name
            if event.detail == EnvelopeKind.MESSAGE:
                bridge = self.bridge
                if name not in bridge.wanted and name in bridge.known:
                    return  # nobody watches this topic: it costs nothing more
            elif name in self.bridge.known_services:
                return
        elif kind not in (Kind.SKIPPED, Kind.ERROR, Kind.RECONNECTED):
            return
        with self._inbox_lock:
            if len(self._inbox) >= INBOX_LIMIT and kind == Kind.RECEIVED:
                self._dropped += 1
                return
            self._inbox.append(event)
            if self._wake_pending:
                return
            self._wake_pending = True
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: we are stopping
                loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._inbox_lock:
            events, self._inbox = self._inbox, []
            self._wake_pending = False
            dropped, self._dropped = self._dropped, 0
        if dropped:
            self.stats["dropped"] += dropped
            message = f"the bridge fell behind: {dropped} messages not forwarded"
            self._dispatch(self.bridge.status(P.StatusLevel.WARNING, message, "mailbus-dropped"))
        now = time.monotonic()
        bridge = self.bridge
        for event in events:
            kind = event.kind
            if kind == Kind.RECEIVED:
                if event.detail != EnvelopeKind.MESSAGE:
                    self._dispatch(bridge.on_service_seen(event.name, now))
                elif event.name == presence.TOPIC:
                    self._take_announcement(event, now)
                else:
                    body = event.body or ""
                    stamp = event.reception_timestamp_ns
                    self._dispatch(bridge.on_message(event.name, body, stamp, now))
            elif kind == Kind.SKIPPED:
                reason = str(event.extra.get("reason", "") or event.detail or "skipped")
                self._skipped[reason] = self._skipped.get(reason, 0) + 1
            elif kind == Kind.ERROR:
                message = f"transport error: {event.detail}"
                self._dispatch(bridge.status(P.StatusLevel.ERROR, message, "mailbus-transport"))
            else:
                message = f"receiving works again: {event.detail}"
                self._dispatch(bridge.status(P.StatusLevel.INFO, message, "mailbus-transport"))

    def _take_announcement(self, event: TraceEvent, now: float) -> None:
        try:
            announcement = presence.decode(event.body or "")
        except presence.PresenceError:
            self.stats["malformed_announcements"] += 1
            return
        self._dispatch(self.bridge.on_announcement(announcement, now))

    def _flush_skipped(self) -> None:
        """One status per reason and tick, however many emails were skipped."""
        skipped, self._skipped = self._skipped, {}
        for reason, count in skipped.items():
            what = "refused signature" if reason in SIGNATURE_REASONS else "skipped"
            message = f"{what}: {count} email{'s' * (count != 1)} ({reason})"
            level = P.StatusLevel.ERROR if reason in SIGNATURE_REASONS else P.StatusLevel.WARNING
            self._dispatch(self.bridge.status(level, message, f"mailbus-skipped-{reason}"))

    # -- calls and publishes (worker threads) ----------------------------------------------
    def _answered(self, call: Call, response: str | None, error: str = "") -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(
                    lambda: self._dispatch(self.bridge.call_done(call, response, error))
                )

    def _call(self, call: Call) -> None:
        try:
            with self._entity_lock:
                client = self._service_clients.get(call.service)
                if client is None:
                    client = self._service_clients[call.service] = self.context.client(call.service)
            response = client.call(call.body, timeout=CALL_TIMEOUT_S)
        except MailbusError as exc:
            self._answered(call, None, str(exc))
            return
        self.stats["calls"] += 1
        self._answered(call, response.body)

    def _answer_local(self, call: Call) -> None:
        try:
            answer: Any = self.local_services[call.service](call.body)
        except (ValueError, MailbusError) as exc:
            self._dispatch(self.bridge.call_done(call, None, str(exc)))
            return
        self._dispatch(self.bridge.call_done(call, str(answer)))

    def _publish(self, publish: Publish) -> None:
        try:
            with self._entity_lock:
                publisher = self._publishers.get(publish.topic)
                if publisher is None:
                    publisher = self._publishers[publish.topic] = self.context.publisher(
                        publish.topic
                    )
            publisher.publish(publish.body)
        except MailbusError as exc:
            loop = self._loop
            status = P.Status(P.StatusLevel.ERROR, f"publish on {publish.topic} failed: {exc}")
            told: list[Effect] = [Send(publish.client, P.encode_server(status))]
            if loop is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._dispatch, told)
            return
        self.stats["published"] += 1

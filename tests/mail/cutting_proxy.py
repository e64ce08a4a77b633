"""A loopback IMAPS proxy that cuts the connection at a chosen point of the protocol.

It terminates TLS on both sides (its certificate comes from the stack's own CA, which
the receiver trusts), so it sees the IMAP text and can cut where only a real network
fault would: part-way through the literal of a message body in a FETCH response, or
while the client waits in IDLE, right as the server announces new mail. A cut is a
plain TCP close of both sides, with no TLS close_notify and no IMAP BYE: what a dropped
line looks like. Each armed cut happens once; later connections pass through.

One thread per connection, with both TLS sessions in memory BIOs, so that no SSL
object is ever used by two threads at once.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

from mailbus.mail.tls import TlsSettings, ssl_context
from mailbus.stacks.loopback import HOST

# The start of a body literal in a FETCH response: `BODY[]<0> {1234}` (Dovecot, Cyrus).
_BODY_LITERAL = re.compile(rb"BODY\[\](?:<\d+>)? \{(\d+)\}\r\n")
_IDLE_COMMAND = re.compile(rb"^\S+ IDLE\r\n", re.IGNORECASE | re.MULTILINE)
_CONTINUATION = re.compile(rb"^\+", re.MULTILINE)  # "+ idling": the server took the IDLE
_ANNOUNCEMENT = re.compile(rb"^\* \d+ (?:EXISTS|RECENT)\r\n", re.MULTILINE)
_KEEP = 256  # bytes of the server's stream kept to find a marker split across reads


@dataclass
class Cut:
    """Where a connection was cut and what the client had received of it."""

    where: str  # "fetch-literal" or "idle"
    literal_size: int = 0  # the body literal's announced size
    literal_sent: int = 0  # how much of it the client got before the cut
    dropped: bytes = b""  # the server's text the client never got (the announcement)


@dataclass
class _Plan:
    where: str | None = None  # armed cut: "fetch-literal", "idle" or None
    literal_index: int = 1  # cut in the n-th body literal of a FETCH response (1-based)
    refuse_after: bool = False  # refuse new connections once the cut is made
    cuts: list[Cut] = field(default_factory=list)


class _Tls:
    """One TLS session over a blocking socket, driven through memory BIOs."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_side: bool) -> None:
        self.sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(
            self._in, self._out, server_side=server_side, server_hostname=None
        )
        self.ready = False
        self._waiting: list[bytes] = []  # plaintext to send once the handshake is done
        self.closed = False

    def handshake(self) -> None:
        try:
            self._obj.do_handshake()
            self.ready = True
        except ssl.SSLWantReadError:
            pass
        self._flush()
        if self.ready:
            waiting, self._waiting = self._waiting, []
            for data in waiting:
                self.write(data)

    def feed(self, raw: bytes) -> bytes:
        """The plaintext that `raw` (bytes read from the socket; b"" at EOF) completes."""
        if raw:
            self._in.write(raw)
        else:
            self._in.write_eof()
            self.closed = True
        if not self.ready:
            self.handshake()
            if not self.ready:
                return b""
        out = []
        while True:
            try:
                chunk = self._obj.read(65536)
            except ssl.SSLWantReadError:
                break
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                self.closed = True
                break
            if not chunk:
                break
            out.append(chunk)
        self._flush()  # a read may have produced a reply (a key update)
        return b"".join(out)

    def write(self, plain: bytes) -> None:
        if not plain:
            return
        if not self.ready:
            self._waiting.append(plain)
            return
        self._obj.write(plain)
        self._flush()

    def _flush(self) -> None:
        data = self._out.read()
        if data:
            self.sock.sendall(data)


class CuttingProxy:
    """Listens on loopback; forwards each connection to the stack's IMAPS port."""

    def __init__(self, stack: Any) -> None:
        cert = stack.ca.issue_cert(HOST)
        self._server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert.configure_cert(self._server_context)
        self._client_context = ssl_context(TlsSettings(ca_file=stack.ca_file))
        self._client_context.check_hostname = False  # the upstream is our own stack
        self._upstream = (HOST, stack.imaps_port)
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"imaps://{HOST}:{self.port}"
        self._lock = threading.Lock()
        self._plan = _Plan()
        self._refusing = False
        self.connections = 0  # connections forwarded upstream
        self.refused = 0  # connections closed at once while refusing
        self.cut_made = threading.Event()
        self.in_idle = threading.Event()  # armed for IDLE, a client is in IDLE
        self._idling: set[int] = set()  # the connections in IDLE now (ids of their state)
        self._open: set[socket.socket] = set()
        self._closing = False
        self._thread = threading.Thread(target=self._accept, name="cutting-proxy", daemon=True)
        self._thread.start()

    # -- what the test asks for ----------------------------------------------------------
    def cut_in_fetch_literal(self, literal_index: int = 1, refuse_after: bool = False) -> None:
        """Cut the connection that sends the `literal_index`-th body literal of FETCH
        responses from now on, after half of that literal went to the client."""
        with self._lock:
            self._plan = _Plan("fetch-literal", literal_index, refuse_after)
            self.cut_made.clear()

    def cut_in_idle(self, refuse_after: bool = False) -> None:
        """Cut the next connection in IDLE when the server announces new mail; the
        client never gets the announcement."""
        with self._lock:
            self._plan = _Plan("idle", refuse_after=refuse_after)
            self.cut_made.clear()
            # A connection already in IDLE counts: the receiver may have gone quiet
            # before the test armed the cut.
            if self._idling:
                self.in_idle.set()
            else:
                self.in_idle.clear()

    def refuse(self, refusing: bool = True) -> None:
        """Close new connections at once (the server looks unreachable) or stop doing so."""
        with self._lock:
            self._refusing = refusing

    def drop_all(self) -> None:
        """End every open connection now, wherever its exchange is (not an armed cut).
        Only shut down here: the connection's own thread sees the end and closes."""
        with self._lock:
            for sock in list(self._open):
                _shut(sock)

    @property
    def cuts(self) -> list[Cut]:
        with self._lock:
            return list(self._plan.cuts)

    def close(self) -> None:
        self._closing = True
        _shut(self._listener)  # ends the accept() that close() alone leaves waiting
        self.drop_all()
        self._thread.join(5)

    # -- the proxy -----------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closing:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                self._listener.close()
                return
            with self._lock:
                refusing = self._refusing
                if refusing:
                    self.refused += 1
                else:
                    self.connections += 1
            if refusing:
                _drop(conn)
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, client_sock: socket.socket) -> None:
        try:
            upstream_sock = socket.create_connection(self._upstream, timeout=10)
        except OSError:
            _drop(client_sock)
            return
        client_sock.settimeout(10)  # every send is bounded
        state = _Stream()
        with self._lock:
            self._open |= {client_sock, upstream_sock}
        try:
            self._pump(client_sock, upstream_sock, state)
        except (OSError, ssl.SSLError):
            pass  # either side went away: the other goes too
        finally:
            with self._lock:
                self._open -= {client_sock, upstream_sock}
                self._idling.discard(id(state))
            _drop(client_sock)
            _drop(upstream_sock)

    def _pump(
        self, client_sock: socket.socket, upstream_sock: socket.socket, state: _Stream
    ) -> None:
        client = _Tls(client_sock, self._server_context, server_side=True)
        upstream = _Tls(upstream_sock, self._client_context, server_side=False)
        upstream.handshake()  # sends the ClientHello
        while not (client.closed or upstream.closed):
            readable, _, _ = select.select([client_sock, upstream_sock], [], [], 30)
            if not readable:
                return  # nothing either way for 30 s: a test is over
            if client_sock in readable:
                text = client.feed(client_sock.recv(65536))
                if _IDLE_COMMAND.search(text):
                    state.idle_sent = True
                elif text.upper().startswith(b"DONE\r\n"):
                    self._set_idling(state, False)
                upstream.write(text)
            if upstream_sock in readable:
                text = upstream.feed(upstream_sock.recv(65536))
                if state.idle_sent and not state.idling and _CONTINUATION.search(text):
                    self._set_idling(state, True)
                forward, cut = self._server_text(state, text)
                client.write(forward)
                if cut is not None:
                    with self._lock:
                        self._plan.cuts.append(cut)
                        self._plan.where = None
                        if self._plan.refuse_after:
                            self._refusing = True
                    self.cut_made.set()
                    return  # _serve closes both sockets, without a word to either

    def _set_idling(self, state: _Stream, idling: bool) -> None:
        with self._lock:
            state.idle_sent = state.idling = idling
            if idling:
                self._idling.add(id(state))
                if self._plan.where == "idle":
                    self.in_idle.set()
            else:
                self._idling.discard(id(state))

    def _server_text(self, state: _Stream, text: bytes) -> tuple[bytes, Cut | None]:
        """What of the server's `text` goes to the client, and the cut if one is due."""
        with self._lock:
            plan = self._plan.where, self._plan.literal_index
        where, literal_index = plan
        if where == "idle" and state.idling:
            found = _ANNOUNCEMENT.search(text)
            if found:
                return text[: found.start()], Cut("idle", dropped=text[found.start() :])
            return text, None
        if where != "fetch-literal":
            return text, None
        if state.literal_left is not None:
            # Inside the chosen literal: pass on up to the cut point, then cut.
            take = min(state.literal_left, len(text))
            state.literal_left -= take
            if state.literal_left == 0:
                assert state.cut is not None
                state.cut.literal_sent += take
                return text[:take], state.cut
            assert state.cut is not None
            state.cut.literal_sent += take
            return text, None
        # Look for the literal's start across read boundaries; forward everything before.
        seen = state.tail + text
        offset = len(state.tail)
        start = 0
        while True:
            found = _BODY_LITERAL.search(seen, start)
            if found is None or found.end() <= offset:
                if found is None:
                    break
                start = found.end()  # already passed on in an earlier read
                continue
            state.literals += 1
            if state.literals < literal_index:
                start = found.end()
                continue
            size = int(found.group(1))
            state.cut = Cut("fetch-literal", literal_size=size)
            state.literal_left = max(1, size // 2)
            head = found.end() - offset  # the literal's first byte, in `text`
            rest = text[head:]
            forward, cut = self._server_text(state, rest)
            return text[:head] + forward, cut
        state.tail = seen[-_KEEP:]
        return text, None


@dataclass
class _Stream:
    """What the proxy knows of one connection's IMAP exchange."""

    idle_sent: bool = False  # the client sent IDLE
    idling: bool = False  # ... and the server accepted it
    literals: int = 0  # body literals seen in the server's stream
    literal_left: int | None = None  # bytes of the chosen literal still to pass on
    cut: Cut | None = None
    tail: bytes = b""


def _shut(sock: socket.socket) -> None:
    """FIN to the peer, no TLS close_notify, nothing more read."""
    with contextlib.suppress(OSError):  # already shut or closed
        sock.shutdown(socket.SHUT_RDWR)


def _drop(sock: socket.socket) -> None:
    """Shut and close at once (from the thread that owns the socket)."""
    _shut(sock)
    sock.close()

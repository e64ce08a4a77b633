"""A blocking PostOffice client.

    with PostOfficeClient("127.0.0.1", 8228) as po:
        po.create_box("robot.arm", "secret")      # BoxExists if it is there already
        po.check_out("robot.arm", "secret")
        po.send("robot.cam", b"hello")
        for letter in po.get_mail(timeout=1.0):   # stops at MAILTIMEOUT
            print(letter.sender, letter.payload)

Every error code the daemon answers becomes its own exception (`ERRORS`). Steps whose
answer the client can predict (REQDATA while it holds a box) are pipelined: SENDLETTER
costs one round trip instead of three. A letter leaves its mailbox only when the client
asks for the next one or says SATIATED, so a client that dies holding a letter gets it
again on its next GETMAIL. Not thread-safe: use one client per thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from mailbus.errors import TransportError
from mailbus.postoffice.protocol import (
    DEFAULT_PORT,
    DIGEST_SIZE,
    INT32_MAX,
    NEED_DATA,
    PAUSED,
    ClientFrame,
    ClientProtocol,
    Command,
    Digest,
    EndOfStream,
    Limits,
    Mail,
    Name,
    Payload,
    ProtocolError,
    Reply,
    RequestCode,
    ResponseCode,
    Timeout,
    check_identifier,
)
from mailbus.tls import handshake_hint


class PostOfficeError(TransportError):
    """Anything that went wrong talking to a PostOffice daemon."""


class ConnectionLost(PostOfficeError):
    """The connection closed or timed out; the client cannot be used any more."""


class ProtocolViolation(PostOfficeError):
    """The daemon sent something the protocol does not allow; the connection is closed."""


class ResponseError(PostOfficeError):
    """The daemon refused a request; `code` is its response code."""

    code: ResponseCode = ResponseCode.BADCOMMAND

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__doc__ or self.code.name)


class NotAuthorized(ResponseError):
    """NOAUTH: wrong password (or a check the daemon refused to make: back-off, busy)."""

    code = ResponseCode.NOAUTH


class BadCommand(ResponseError):
    """BADCOMMAND: the daemon did not accept the request code here."""

    code = ResponseCode.BADCOMMAND


class AlreadyConnected(ResponseError):
    """ALREADYCONN: this connection already holds a mailbox; return it first."""

    code = ResponseCode.ALREADYCONN


class MailTimeout(ResponseError):
    """MAILTIMEOUT where it ends something other than a get_mail iteration."""

    code = ResponseCode.MAILTIMEOUT


class BoxExists(ResponseError):
    """BOXEXISTS: the daemon will not create that mailbox (it exists, the name is invalid
    or a group's, or a limit is reached: the daemon's log says which)."""

    code = ResponseCode.BOXEXISTS


class NoSuchBox(ResponseError):
    """NONEXISTBOX: no mailbox with that name."""

    code = ResponseCode.NONEXISTBOX


class NoBoxConnected(ResponseError):
    """NOBOXCONN: check out a mailbox first."""

    code = ResponseCode.NOBOXCONN


class BoxInUse(ResponseError):
    """BOXINUSE: another connection has this mailbox checked out."""

    code = ResponseCode.BOXINUSE


class DeliveryFailed(ResponseError):
    """DELFAIL: the letter was not delivered (no such recipient, letter too large,
    recipient's mailbox full)."""

    code = ResponseCode.DELFAIL


class ServerShutdown(ResponseError):
    """SHUTDOWN: the daemon is stopping, or refused this connection (connection limit)."""

    code = ResponseCode.SHUTDOWN


class CommTimeout(ResponseError):
    """COMMTIMEOUT: this client was silent too long inside a command."""

    code = ResponseCode.COMMTIMEOUT


class Unsupported(ResponseError):
    """UNSUPPORTED: the daemon does not support this request (or refuses a plain
    connection from another host: connect with TLS, tls = true)."""

    code = ResponseCode.UNSUPPORTED


ERRORS: dict[ResponseCode, type[ResponseError]] = {
    cls.code: cls
    for cls in (
        NotAuthorized,
        BadCommand,
        AlreadyConnected,
        MailTimeout,
        BoxExists,
        NoSuchBox,
        NoBoxConnected,
        BoxInUse,
        DeliveryFailed,
        ServerShutdown,
        CommTimeout,
        Unsupported,
    )
}


@dataclass(frozen=True, slots=True)
class Letter:
    sender: str
    payload: bytes


def to_digest(password: str | bytes) -> bytes:
    """The wire form of a password: MD5 of its UTF-8 bytes (a str), or a 16-byte
    digest given as bytes."""
    if isinstance(password, bytes):
        if len(password) != DIGEST_SIZE:
            raise ValueError("a password given as bytes must be its 16-byte MD5 digest")
        return password
    return hashlib.md5(password.encode("utf-8"), usedforsecurity=False).digest()


class PostOfficeClient:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        timeout: float = 30.0,
        max_letter_bytes: int = 64 * 1024 * 1024,
        pipeline: bool = True,
        tls: ssl.SSLContext | None = None,
        server_name: str = "",
    ) -> None:
        """`tls`: speak the same protocol inside TLS with this client context (see
        mailbus.tls.client_context); the certificate must be for `server_name` (default:
        `host`)."""
        self.host = host
        self.port = port
        self.timeout = timeout
        self.pipeline = pipeline
        self.box: str | None = None
        self._proto = ClientProtocol(
            Limits(max_payload_bytes=max_letter_bytes, max_buffer_bytes=max_letter_bytes + 64)
        )
        self._in_mail = False
        self._lost = "the connection is closed"
        try:
            self._sock: socket.socket | None = socket.create_connection((host, port), timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to PostOffice at {host}:{port}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._answered = False  # a close before any reply gets a hint about TLS
        if tls is not None:
            self._sock = self._handshake(self._sock, tls, server_name or host)
        # A blocking socket with kernel timeouts: Python's own socket timeout polls before
        # every recv and send, doubling the system calls per letter.
        self._sock.settimeout(None)
        self._recv_timeout = -1.0
        self._set_timeout(socket.SO_SNDTIMEO, timeout)
        self._set_timeout(socket.SO_RCVTIMEO, timeout)

    def _handshake(
        self, sock: socket.socket, context: ssl.SSLContext, server_name: str
    ) -> ssl.SSLSocket:
        where = f"PostOffice at {self.host}:{self.port}"
        try:
            return context.wrap_socket(sock, server_hostname=server_name)
        except ssl.SSLError as exc:
            sock.close()
            raise ConnectionLost(f"TLS with {where} failed: {handshake_hint(exc)}") from None
        except OSError as exc:
            sock.close()
            raise ConnectionLost(
                f"TLS with {where} failed: the server closed the connection during the "
                f"handshake ({exc}); does it require a client certificate?"
            ) from None

    def __repr__(self) -> str:
        return f"PostOfficeClient({self.host}:{self.port}, box={self.box!r})"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    # -- plumbing ----------------------------------------------------------------------
    def _fail(self, error: PostOfficeError) -> PostOfficeError:
        # A connection that failed stays failed (h11's rule): every later call raises
        # ConnectionLost with this first reason, whatever step the protocol was at.
        self._lost = f"the connection was lost: {error}"
        self._drop()
        return error

    def _check_open(self) -> socket.socket:
        if self._sock is None:
            raise ConnectionLost(self._lost)
        return self._sock

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        self.box = None
        if sock is not None:
            sock.close()

    def _write(self, data: bytes) -> None:
        sock = self._check_open()
        try:
            sock.sendall(data)
        except OSError as exc:
            raise self._fail(ConnectionLost(f"send failed: {exc}")) from exc

    def _frames(self, *frames: ClientFrame) -> bytes:
        self._check_open()
        try:
            return b"".join(self._proto.send(frame) for frame in frames)
        except ProtocolError as exc:
            if self._in_mail:
                raise PostOfficeError("finish or close the get_mail iteration first") from exc
            raise PostOfficeError(str(exc)) from exc

    def _set_timeout(self, option: int, seconds: float) -> None:
        assert self._sock is not None
        whole = int(seconds)
        micro = int((seconds - whole) * 1_000_000)
        self._sock.setsockopt(socket.SOL_SOCKET, option, struct.pack("ll", whole, micro))
        if option == socket.SO_RCVTIMEO:
            self._recv_timeout = seconds

    def _event(self, wait: float | None = None) -> Reply | Mail:
        """The next reply, reading as needed for up to `wait` + the I/O timeout."""
        sock = self._check_open()
        deadline = time.monotonic() + self.timeout + (wait or 0.0)
        while True:
            try:
                event = self._proto.next_event()
            except ProtocolError as exc:
                if not self._answered and not isinstance(sock, ssl.SSLSocket):
                    raise self._fail(
                        ProtocolViolation(
                            f"the daemon's first answer is not PostOffice ({exc}): is it a "
                            "TLS port? (set tls = true)"
                        )
                    ) from exc
                raise self._fail(ProtocolViolation(str(exc))) from exc
            if isinstance(event, Reply | Mail):
                self._answered = True
                if isinstance(event, Reply) and event.response in (
                    ResponseCode.SHUTDOWN,
                    ResponseCode.COMMTIMEOUT,
                ):
                    raise self._fail(ERRORS[event.response]())
                return event
            if isinstance(event, EndOfStream) or event is PAUSED:
                if not self._answered:
                    hint = (
                        "does it require a client certificate? (cert-file)"
                        if isinstance(sock, ssl.SSLSocket)
                        else "is it a TLS port? (set tls = true)"
                    )
                    raise self._fail(
                        ConnectionLost(
                            f"the daemon closed the connection without answering: {hint}"
                        )
                    )
                raise self._fail(ConnectionLost("the daemon closed the connection"))
            assert event is NEED_DATA
            if time.monotonic() >= deadline:
                raise self._fail(ConnectionLost(f"no answer within {self.timeout} s"))
            bound = self.timeout + (wait or 0.0)
            if bound != self._recv_timeout:
                self._set_timeout(socket.SO_RCVTIMEO, bound)
            try:
                data = sock.recv(256 * 1024)
            except (BlockingIOError, ssl.SSLWantReadError):
                continue  # SO_RCVTIMEO expired: the deadline check above decides
            except ssl.SSLError as exc:  # TLS 1.3 refuses a client certificate here
                raise self._fail(ConnectionLost(f"TLS: {handshake_hint(exc)}")) from exc
            except OSError as exc:
                raise self._fail(ConnectionLost(f"receive failed: {exc}")) from exc
            if not self._answered and data[:1] == bytes((ResponseCode.UNSUPPORTED,)):
                # The daemon's one answer to a plain connection it refuses from afar,
                # whatever was pipelined.
                raise self._fail(
                    Unsupported(
                        "the daemon refuses a plain connection from another host: "
                        "connect with TLS (tls = true)"
                    )
                )
            try:
                self._proto.receive_data(data)
            except ProtocolError as exc:
                raise self._fail(ProtocolViolation(str(exc))) from exc

    def _reply(self, wait: float | None = None) -> ResponseCode:
        event = self._event(wait)
        if isinstance(event, Mail):
            raise self._fail(ProtocolViolation("a letter where a reply was due"))
        return event.response

    def _exchange(self, frames: list[ClientFrame], pipeline: bool) -> ResponseCode:
        """Run one request: frames[0] is its code, the rest its data steps. Returns the
        reply that ended it (or REQDATA after the last frame)."""
        if pipeline and self.pipeline:
            self._write(self._frames(*frames))
            for index in range(len(frames)):
                response = self._reply()
                if response is not ResponseCode.REQDATA or index == len(frames) - 1:
                    return response
            raise AssertionError("unreachable")
        for index, frame in enumerate(frames):
            self._write(self._frames(frame))
            response = self._reply()
            if response is not ResponseCode.REQDATA or index == len(frames) - 1:
                return response
        raise AssertionError("unreachable")

    @staticmethod
    def _check(response: ResponseCode, *ok: ResponseCode) -> ResponseCode:
        if response in ok:
            return response
        error = ERRORS.get(response)
        if error is None:
            raise ProtocolViolation(f"unexpected reply {response.name}")
        raise error()

    # -- the API -----------------------------------------------------------------------
    def create_box(self, name: str, password: str | bytes) -> None:
        """Create a mailbox (BoxExists when refused: taken, a group's name, a limit)."""
        frames: list[ClientFrame] = [
            Command(RequestCode.CREATEBOX),
            Name(check_identifier(name)),
            Digest(to_digest(password)),
        ]
        self._check(self._exchange(frames, pipeline=True), ResponseCode.REQGRANTED)

    def check_out(self, name: str, password: str | bytes) -> None:
        """Check out a mailbox: sending and receiving then use it."""
        frames: list[ClientFrame] = [
            Command(RequestCode.REQBOX),
            Name(check_identifier(name)),
            Digest(to_digest(password)),
        ]
        response = self._exchange(frames, pipeline=self.box is None)
        self._check(response, ResponseCode.REQGRANTED)
        self.box = name

    def return_box(self) -> None:
        self._check(self._exchange([Command(RequestCode.RETBOX)], False), ResponseCode.REQGRANTED)
        self.box = None

    def send(self, recipient: str, payload: bytes) -> None:
        """Send a letter; returns once the daemon has stored it (DeliveryFailed if not)."""
        frames: list[ClientFrame] = [
            Command(RequestCode.SENDLETTER),
            Name(check_identifier(recipient)),
            Payload(bytes(payload)),
        ]
        response = self._exchange(frames, pipeline=self.box is not None)
        self._check(response, ResponseCode.REQGRANTED)

    def get_mail(self, timeout: float) -> Iterator[Letter]:
        """Yield the letters of the checked-out mailbox as they come, until none came
        within `timeout` seconds of the start (0: only those already waiting).
        Leaving the loop early sends SATIATED; the letter last yielded is then taken
        out of the mailbox, the ones after it stay."""
        milliseconds = min(INT32_MAX, max(0, round(timeout * 1000)))
        frames: list[ClientFrame] = [Command(RequestCode.GETMAIL), Timeout(milliseconds)]
        response = self._exchange(frames, pipeline=self.box is not None)
        if response is ResponseCode.MAILTIMEOUT:
            return
        self._check(response, ResponseCode.REQDATA)
        self._in_mail = True
        deadline = time.monotonic() + milliseconds / 1000.0
        finished = False
        try:
            while True:
                self._write(self._frames(Command(RequestCode.NEXTLETTER)))
                event = self._event(max(0.0, deadline - time.monotonic()))
                if isinstance(event, Mail):
                    yield Letter(event.sender, event.payload)
                    continue
                finished = True
                self._check(event.response, ResponseCode.MAILTIMEOUT)
                return
        except GeneratorExit:
            # The caller left the loop: SATIATED takes the letter it holds out of the box.
            # If that fails the connection is gone and the letter stays for next time.
            self._in_mail = False
            if not finished and self._sock is not None:
                try:
                    self._write(self._frames(Command(RequestCode.SATIATED)))
                    self._check(self._reply(), ResponseCode.REQGRANTED)
                except PostOfficeError as exc:
                    self._fail(exc)
            raise
        finally:
            self._in_mail = False

    def empty(self) -> None:
        """Delete every letter in the checked-out mailbox."""
        self._check(self._exchange([Command(RequestCode.EMPTYBOX)], False), ResponseCode.REQGRANTED)

    def remove(self) -> None:
        """Remove the checked-out mailbox and its letters (with the password it was
        checked out with)."""
        self._check(
            self._exchange([Command(RequestCode.REMOVEBOX)], False), ResponseCode.REQGRANTED
        )
        self.box = None

    def abort(self) -> None:
        """Cut the connection without a word (from any thread): a call blocked in this
        client returns with ConnectionLost. The daemon returns the box."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """DISCONNECT (the daemon returns the box) and close the socket."""
        if self._sock is None:
            return
        try:
            if self._proto.idle:
                self._write(self._frames(Command(RequestCode.DISCONNECT)))
                self._reply()
        except PostOfficeError:
            pass
        finally:
            self._drop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

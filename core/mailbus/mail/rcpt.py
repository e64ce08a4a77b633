"""Which recipient the SMTP server refused: a sans-IO reader of libcurl's protocol trace.

libcurl reports one result per transfer. With CURLOPT_MAIL_RCPT_ALLOWFAILS it goes on
to DATA when some RCPT TO were refused, and says nothing about which. Its debug
callback shows every command it sent (HEADER_OUT) and every reply line it read
(HEADER_IN); without pipelining (libcurl sends one RCPT and waits for its reply) the
final reply line after a `RCPT TO:<a>` is the answer for `a`.

The trace also carries AUTH, whose argument is the password in base64: this reader
looks only at `RCPT TO:` lines and reply codes and keeps nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINE = 4096  # longer reply lines are cut: only their code and start matter


@dataclass(frozen=True, slots=True)
class RcptReply:
    """The server's final reply to the `index`-th RCPT TO of a transaction."""

    index: int
    address: str
    code: int
    text: str

    @property
    def refused(self) -> bool:
        return self.code >= 400

    @property
    def permanent(self) -> bool:
        return 500 <= self.code < 600


class RcptTracker:
    """Feed it what libcurl's debug callback shows; read `replies`. `reset()` before
    each transaction."""

    def __init__(self) -> None:
        self.replies: list[RcptReply] = []
        self._count = 0
        self._waiting: str | None = None  # the address of the RCPT awaiting its reply
        self._out = b""
        self._in = b""

    def reset(self) -> None:
        self.replies = []
        self._count = 0
        self._waiting = None
        self._out = self._in = b""

    def sent(self, data: bytes) -> None:
        """Bytes of commands libcurl sent (CURLINFO_HEADER_OUT)."""
        self._out += data
        *lines, self._out = self._out.split(b"\n")
        if len(self._out) > MAX_LINE:  # not a command line: forget it
            self._out = b""
        for line in lines:
            if line[:8].upper() == b"RCPT TO:":
                address = line[8:].strip().split(b" ", 1)[0].strip(b"<>")
                self._waiting = address.decode("utf-8", "replace")
            else:
                # Anything else (MAIL, DATA, AUTH and its base64 lines) ends the wait
                # and is not kept.
                self._waiting = None

    def received(self, data: bytes) -> None:
        """Bytes of reply lines libcurl read (CURLINFO_HEADER_IN)."""
        self._in += data
        *lines, self._in = self._in.split(b"\n")
        if len(self._in) > MAX_LINE:
            self._in = self._in[:MAX_LINE]
        for line in lines:
            line = line.rstrip(b"\r")
            code = line[:3]
            if len(code) < 3 or not code.isdigit() or line[3:4] not in (b" ", b""):
                continue  # a continuation line (`250-...`) or not a reply
            if self._waiting is not None:
                text = line[4:MAX_LINE].decode("utf-8", "replace")
                self.replies.append(RcptReply(self._count, self._waiting, int(code), text))
                self._count += 1
                self._waiting = None

    @property
    def refused(self) -> list[RcptReply]:
        return [r for r in self.replies if r.refused]

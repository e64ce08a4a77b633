"""The IMAP wire under imapclient: the raw commands and responses the receivers need and
imapclient has no method for.

imapclient gives no way to send a command it does not know (LIST-STATUS's `RETURN
(STATUS ...)`, NOTIFY), to read the untagged responses a NOOP or a FETCH brought along
(EXISTS, STATUS, an untagged NO), to start an IDLE that tolerates news before the
server's continuation, or to pipeline a UID FETCH on an open range without its 4.0-4.1
`int()` filter failing on it. All of it goes through the imaplib connection imapclient
keeps in a private attribute, with imaplib's private command methods: this module is the
only one that touches them (tests/contracts/test_private_names.py refuses them
anywhere else), and pyproject.toml bounds imapclient to the major version the suite
runs, so an upgrade that moves them fails here, in one place.
"""

from __future__ import annotations

import imaplib
import ssl
from typing import Any

import imapclient
from imapclient import exceptions as imap_errors

# imaplib checks each command against its table; NOTIFY (RFC 5465) is not in it.
imaplib.Commands.setdefault("NOTIFY", ("AUTH", "SELECTED"))

Word = str | bytes


def _conn(client: imapclient.IMAPClient) -> imaplib.IMAP4:
    conn: imaplib.IMAP4 = client._imap
    return conn


def command(client: imapclient.IMAPClient, *words: Word, check: bool = True) -> list[Any]:
    """Send one command (`words` as they go on the wire) and read up to its tagged
    answer; its data. `check`: raise IMAPClientError unless the answer is OK."""
    conn = _conn(client)
    name = str(words[0])
    typ, data = conn._command_complete(name, conn._command(name, *words[1:]))
    if check and typ != "OK":
        raise imap_errors.IMAPClientError(f"{' '.join(map(str, words[:2]))} failed: {data!r}")
    out: list[Any] = data
    return out


def take_untagged(client: imapclient.IMAPClient, kind: str) -> list[Any]:
    """The untagged responses of `kind` (`STATUS`, `FETCH`, ...) read so far, removed."""
    taken: list[Any] = _conn(client).untagged_responses.pop(kind, [])
    return taken


def has_untagged(client: imapclient.IMAPClient, kind: str) -> bool:
    """Whether the server sent an untagged response of `kind` (`EXISTS`, `NO`) since the
    last `clear_untagged`."""
    return kind in _conn(client).untagged_responses


def untagged_count(client: imapclient.IMAPClient) -> int:
    """How many untagged responses are kept (imaplib keeps them until they are taken)."""
    return sum(len(v) for v in _conn(client).untagged_responses.values())


def clear_untagged(client: imapclient.IMAPClient) -> None:
    """Forget the untagged responses read so far (imaplib keeps them for ever otherwise)."""
    _conn(client).untagged_responses.clear()


def uid_fetch(client: imapclient.IMAPClient, uids: str, items: list[bytes]) -> list[Any]:
    """`UID FETCH uids (items)`: the raw untagged FETCH data, for imapclient's parser.
    (imapclient 4.0-4.1's own fetch raises ValueError on an open range `n:*` after the
    server answered: it filters results with int().)"""
    command(client, "UID", "FETCH", uids, b"(" + b" ".join(items) + b")")
    return take_untagged(client, "FETCH")


def start_idle(client: imapclient.IMAPClient) -> bool:
    """Send IDLE and read up to the server's continuation; True if it announced new mail
    first (EXISTS, RECENT, or a NOTIFY STATUS). imapclient's idle() raises on any
    untagged response before the continuation, which comes when mail arrived since the
    last poll. Ended with imapclient's public `idle_done()`."""
    conn = _conn(client)
    tag = conn._command("IDLE")
    client._idle_tag = tag  # what idle_done() waits for
    news = False
    while True:
        line = conn._get_response()
        if line is None:  # "+ idling"
            conn.untagged_responses.clear()
            # What the server said at once (mail that came since the last poll) may
            # already be read into imaplib's buffer, out of sight of the IDLE's poll.
            return news or input_waiting(client)
        if conn.tagged_commands.get(tag):
            raise imap_errors.IMAPClientError(f"IDLE refused: {line!r}")
        if line.endswith((b" EXISTS", b" RECENT")) or line.startswith(b"* STATUS "):
            news = True


def input_waiting(client: imapclient.IMAPClient) -> bool:
    """Whether the server's next line is already here. imaplib reads the socket through
    a buffer: a line that came with the previous one (Dovecot sends "* n EXISTS" right
    after "+ idling" for mail that landed just before the IDLE) sits there, where a poll
    of the socket cannot see it."""
    conn = _conn(client)
    sock = conn.sock
    timeout = sock.gettimeout()
    sock.setblocking(False)  # an empty buffer: one read that does not wait
    try:
        return bool(conn.file.peek(1))  # type: ignore[union-attr]  # a BufferedReader
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    finally:
        sock.settimeout(timeout)

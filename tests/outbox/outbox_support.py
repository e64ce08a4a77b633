"""Test support for the outbox: a real SMTP peer (Postfix's smtp-sink on a random
loopback port, dumping each accepted message to a file) and an EmailSender that talks
to it with smtplib. Imported by the tests and by the crash-test child processes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import smtplib
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from mailbus.email_message import Email, to_bytes
from mailbus.errors import TransportError
from mailbus.stacks.loopback import free_port
from mailbus.transport import EmailSender

# Child processes import this module without pytest's conftest: tests/ (the shared
# bounded wait, `waiting.eventually`) goes on their path here.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from waiting import eventually

__all__ = ["eventually"]  # re-exported for the child processes

SMTP_SINK = shutil.which("smtp-sink") or "/usr/sbin/smtp-sink"
_MESSAGE_ID = re.compile(rb"^Message-ID:\s*(<[^>\s]+>)", re.IGNORECASE | re.MULTILINE)
# Every test body ends with this line, so that a dump of a transfer cut short is not
# counted as a delivery.
TRAILER = "END-OF-TEST-MAIL"


class SmtpSink:
    """smtp-sink on 127.0.0.1:<random port>, one file per message under `dump`."""

    def __init__(self, base: Path, *extra: str) -> None:
        self.dump = base / "sink"
        self.dump.mkdir(parents=True, exist_ok=True)
        self.extra = extra
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._seen: dict[str, bytes | None] = {}

    def start(self) -> SmtpSink:
        for _ in range(5):
            self.port = free_port()
            # smtp-sink refuses to run as root without -u; root keeps the dump writable.
            user = ["-u", "root"] if os.geteuid() == 0 else []
            self.proc = subprocess.Popen(
                [
                    SMTP_SINK,
                    *user,
                    *self.extra,
                    "-d",
                    f"{self.dump}/%M.",
                    f"127.0.0.1:{self.port}",
                    "100",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            try:
                eventually(self._accepting, 10.0, "smtp-sink to accept connections")
                return self
            except AssertionError:
                self.stop()
        raise RuntimeError("smtp-sink did not start")

    def _accepting(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            return True  # exited (port taken): start() notices below
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.5).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            self.proc = None

    def message_ids(self) -> Counter[str]:
        """How many complete copies of each Message-ID the sink accepted."""
        counts: Counter[str] = Counter()
        for name in os.listdir(self.dump):
            data = self._seen.get(name)
            if data is None:
                raw = (self.dump / name).read_bytes()
                if TRAILER.encode() not in raw:
                    continue  # still being written, or a transfer cut short
                match = _MESSAGE_ID.search(raw)
                data = match.group(1) if match else b"?"
                self._seen[name] = data
            counts[data.decode()] += 1
        return counts

    def dumps(self) -> list[bytes]:
        return [(self.dump / n).read_bytes() for n in sorted(os.listdir(self.dump))]


class SmtplibSender(EmailSender):
    """Sends over one kept-open smtplib connection; a 5xx reply is a permanent error."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self._smtp: smtplib.SMTP | None = None
        self.sent = 0

    def deliver(self, email: Email) -> None:
        data = email.raw if email.raw is not None else to_bytes(email)
        try:
            if self._smtp is None:
                self._smtp = smtplib.SMTP(self.host, self.port, timeout=10)
            self._smtp.sendmail(email.sender, list(email.recipients), data)
        except smtplib.SMTPResponseException as exc:
            self._drop()
            error = TransportError(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}")
            error.permanent = exc.smtp_code >= 500  # type: ignore[attr-defined]
            raise error from exc
        except smtplib.SMTPRecipientsRefused as exc:
            self._drop()
            codes = [code for code, _ in exc.recipients.values()]
            error = TransportError(f"SMTP recipients refused: {codes}")
            error.permanent = all(code >= 500 for code in codes)  # type: ignore[attr-defined]
            raise error from exc
        except (OSError, smtplib.SMTPException) as exc:
            self._drop()
            raise TransportError(f"SMTP send failed: {exc}") from exc
        self.sent += 1

    def _drop(self) -> None:
        if self._smtp is not None:
            with contextlib.suppress(Exception):
                self._smtp.close()
            self._smtp = None

    def close(self) -> None:
        if self._smtp is not None:
            with contextlib.suppress(Exception):
                self._smtp.quit()
            self._drop()


class RecordingSender(EmailSender):
    """Keeps what it is given; fails while `failures` > 0 (or for ever if `fail_with`)."""

    def __init__(self) -> None:
        self.sent: list[Email] = []
        self.failures = 0
        self.fail_with: Exception | None = None
        self.lock = threading.Lock()

    def deliver(self, email: Email) -> None:
        with self.lock:
            if self.fail_with is not None:
                raise self.fail_with
            if self.failures > 0:
                self.failures -= 1
                raise TransportError("temporary failure (test)")
            self.sent.append(email)


def make_email(n: int | str, *, message_id: str = "", to: str = "rcpt@example.org") -> Email:
    return Email(
        subject="outbox/test",
        body=f"mail {n}\n{TRAILER}",
        sender="sender@example.org",
        to=(to,),
        message_id=message_id,
    )


def tree(root: Path) -> dict[str, str]:
    """The directory tree as {relative path: kind}, kind being 'dir 700', 'file 600' or
    'link -> target': what the layout tests compare with the design."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = path.lstat()
            if path.is_symlink():
                found[rel] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                found[rel] = f"dir {st.st_mode & 0o777:o}"
            else:
                found[rel] = f"file {st.st_mode & 0o777:o}"
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
    return found

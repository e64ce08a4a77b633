"""A small SMTP server that hands every accepted email to Dovecot over LMTP.

The stand-in for Postfix where the tests do not run as root (Postfix needs root):
SMTPS and SMTP with STARTTLS on loopback, AUTH PLAIN/LOGIN checked against the stack's
users (only under TLS, as Postfix is configured), MAIL/RCPT/DATA with dot-unstuffing,
a 550 for the stack's REJECTED address, a 450 for its DEFERRED address, and delivery
through Dovecot's LMTP socket before the 250, so an accepted email is in the inbox.
It runs an asyncio loop in a thread of the test process and can be stopped and started
again like Postfix.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import smtplib
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

MAX_LINE = 4096
MAX_MESSAGE = 10_240_000


class LmtpRelay:
    def __init__(
        self,
        host: str,
        smtp_port: int,
        smtps_port: int,
        cert_file: Path,
        key_file: Path,
        lmtp_socket: Path,
        check_login: Callable[[str, str], bool],
        rejected: str,
        deferred: str = "",
    ) -> None:
        self.host = host
        self.ports = (smtp_port, smtps_port)
        self.lmtp_socket = lmtp_socket
        self.check_login = check_login
        self.rejected = rejected
        self.deferred = deferred
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(str(cert_file), str(key_file))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.delivered = 0

    # -- life cycle -------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                failure.append(exc)
                loop.run_until_complete(self._close_servers())
                loop.close()
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        thread = threading.Thread(target=run, name="lmtp-relay", daemon=True)
        self._thread = thread
        thread.start()
        if not ready.wait(10) or failure:
            thread.join(10)
            self._loop = None
            self._thread = None
            if failure and isinstance(failure[0], OSError):
                raise failure[0]  # a port taken: the caller may choose others
            raise RuntimeError(f"LMTP relay did not start: {failure}")

    async def _listen(self) -> None:
        smtp_port, smtps_port = self.ports
        self._servers = []
        self._servers.append(
            await asyncio.start_server(
                lambda r, w: self._session(r, w, tls=False), self.host, smtp_port
            )
        )
        self._servers.append(
            await asyncio.start_server(
                lambda r, w: self._session(r, w, tls=True), self.host, smtps_port, ssl=self.tls
            )
        )

    async def _close_servers(self) -> None:
        for server in self._servers:
            server.close()
            await server.wait_closed()
        self._servers = []

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def close() -> None:
            for server in self._servers:
                server.close()
            for writer in list(self._writers):
                writer.close()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for server in self._servers:
                await server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = None
        self._thread = None

    # -- one SMTP session -------------------------------------------------------------
    async def _session(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tls: bool
    ) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._converse(reader, writer, tls)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, ValueError):
            pass  # the client went away or spoke garbage: end the session
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _converse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tls: bool
    ) -> None:
        async def reply(text: str) -> None:
            writer.write(text.encode() + b"\r\n")
            await writer.drain()

        async def line() -> str:
            raw = await reader.readuntil(b"\n")
            if len(raw) > MAX_LINE:
                raise ValueError("line too long")
            return raw.decode("utf-8", "replace").rstrip("\r\n")

        authed = False
        mail_from: str | None = None
        recipients: list[str] = []
        await reply("220 relay.mailbus.test ESMTP LMTP relay")
        while True:
            command = await line()
            verb, _, arg = command.partition(" ")
            verb = verb.upper()
            if verb in ("EHLO", "HELO"):
                features = ["relay.mailbus.test", "8BITMIME", f"SIZE {MAX_MESSAGE}"]
                features += ["AUTH PLAIN LOGIN"] if tls else ["STARTTLS"]
                for feature in features[:-1]:
                    await reply(f"250-{feature}")
                await reply(f"250 {features[-1]}")
            elif verb == "STARTTLS" and not tls:
                await reply("220 go ahead")
                await writer.start_tls(self.tls)
                tls, authed, mail_from, recipients = True, False, None, []
            elif verb == "AUTH" and tls and not authed:
                authed = await self._auth(arg, reply, line)
            elif verb == "AUTH":
                await reply("503 5.5.1 AUTH not allowed now")
            elif verb == "MAIL":
                if not authed:
                    await reply("530 5.7.0 authentication required")
                    continue
                size = next((int(p[5:]) for p in arg.upper().split() if p.startswith("SIZE=")), 0)
                if size > MAX_MESSAGE:
                    await reply("552 5.3.4 message size exceeds fixed limit")
                    continue
                mail_from, recipients = _address(arg), []
                await reply("250 2.1.0 ok")
            elif verb == "RCPT":
                if mail_from is None:
                    await reply("503 5.5.1 MAIL first")
                elif _address(arg).lower() == self.rejected:
                    await reply("550 5.1.1 no such user")
                elif self.deferred and _address(arg).lower() == self.deferred:
                    await reply("450 4.2.1 mailbox busy, try again later")
                else:
                    recipients.append(_address(arg))
                    await reply("250 2.1.5 ok")
            elif verb == "DATA":
                if mail_from is None or not recipients:
                    await reply("503 5.5.1 RCPT first")
                    continue
                await reply("354 end with <CRLF>.<CRLF>")
                data = await self._read_data(reader)
                if data is None:
                    await reply("552 5.3.4 message size exceeds fixed limit")
                    mail_from, recipients = None, []
                    continue
                try:
                    await asyncio.get_running_loop().run_in_executor(
                        None, self._deliver, mail_from, recipients, data
                    )
                except (OSError, smtplib.SMTPException) as exc:
                    await reply(f"451 4.3.0 LMTP delivery failed: {exc}")
                else:
                    self.delivered += 1
                    await reply("250 2.0.0 delivered")
                mail_from, recipients = None, []
            elif verb == "RSET":
                mail_from, recipients = None, []
                await reply("250 2.0.0 ok")
            elif verb == "NOOP":
                await reply("250 2.0.0 ok")
            elif verb == "QUIT":
                await reply("221 2.0.0 bye")
                return
            else:
                await reply("502 5.5.2 command not recognized")

    async def _auth(self, arg: str, reply: Callable, line: Callable) -> bool:  # type: ignore[type-arg]
        mechanism, _, initial = arg.partition(" ")
        try:
            if mechanism.upper() == "PLAIN":
                if not initial:
                    await reply("334 ")
                    initial = await line()
                _, user, password = base64.b64decode(initial).decode().split("\0", 2)
            elif mechanism.upper() == "LOGIN":
                await reply("334 VXNlcm5hbWU6")
                user = base64.b64decode(await line()).decode()
                await reply("334 UGFzc3dvcmQ6")
                password = base64.b64decode(await line()).decode()
            else:
                await reply("504 5.5.4 mechanism not supported")
                return False
        except (binascii.Error, UnicodeDecodeError, ValueError):
            await reply("501 5.5.2 cannot decode")
            return False
        if self.check_login(user, password):
            await reply("235 2.7.0 authenticated")
            return True
        await reply("535 5.7.8 authentication failed")
        return False

    @staticmethod
    async def _read_data(reader: asyncio.StreamReader) -> bytes | None:
        """The message up to the lone dot; None (after reading it all) if too large."""
        lines: list[bytes] = []
        size = 0
        while True:
            raw = await reader.readuntil(b"\n")
            if raw in (b".\r\n", b".\n"):
                return b"".join(lines) if size <= MAX_MESSAGE else None
            size += len(raw)
            if size <= MAX_MESSAGE:
                lines.append(raw[1:] if raw.startswith(b"..") else raw)

    def _deliver(self, mail_from: str, recipients: list[str], data: bytes) -> None:
        client = smtplib.LMTP(str(self.lmtp_socket))
        try:
            client.sendmail(mail_from, recipients, data)
        finally:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                client.quit()


def _address(arg: str) -> str:
    """The address in `FROM:<a@b> SIZE=1` or `TO:<a@b>`."""
    start, end = arg.find("<"), arg.find(">")
    if start < 0 or end < start:
        raise ValueError(f"no address in {arg!r}")
    return arg[start + 1 : end]

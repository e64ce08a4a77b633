"""A throw-away mail stack on loopback: Dovecot (IMAP, IMAPS, LMTP) and Postfix (SMTP
with STARTTLS, SMTPS, AUTH through Dovecot) delivering into Dovecot over LMTP.

Everything lives in one temporary directory, listens on 127.0.0.1 on random free ports
and is stopped by process id. Certificates come from trustme (the `test` extra). Used by
the tests (tests/conftest.py), the benchmarks and users' own tests:

    with MailStack() as stack:
        user = stack.add_user()
        ... stack.smtps_url, stack.imaps_url, stack.ca_file, user.address, user.password

Postfix needs root. Without root (or with `postfix=False`) the SMTP ports are served
by a small relay (lmtp_relay.py) that delivers over LMTP straight into Dovecot;
`stack.has_postfix` is then False and `stack.why_no_postfix` says why.
`start_smtp()` / `stop_smtp()` start and stop whichever SMTP server the stack runs,
`start_imap()` / `stop_imap()` the IMAP server (`server` names it: "dovecot" here,
"cyrus" for the Cyrus stack, cyrus_stack.CyrusStack, which keeps this interface).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import secrets
import shutil
import signal
import smtplib
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mailbus.extras import require
from mailbus.stacks.lmtp_relay import LmtpRelay
from mailbus.stacks.loopback import HOST, free_port, log_tail
from mailbus.stacks.mail_config import (
    DEFERRED,
    DOMAIN,
    REJECTED,
    dovecot_conf,
    postfix_main_cf,
    postfix_master_cf,
)

__all__ = [
    "DEFERRED",
    "DOMAIN",
    "HOST",
    "MAX_USERIP_CONNECTIONS",
    "REJECTED",
    "MailStack",
    "MailStackError",
    "User",
    "free_port",
]

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
POSTFIX = shutil.which("postfix") or "/usr/sbin/postfix"
POSTFIX_MASTER = "/usr/lib/postfix/sbin/master"


class MailStackError(RuntimeError):
    """The stack could not start; the message carries the tail of the server's log."""


@dataclass(frozen=True)
class User:
    name: str
    password: str

    @property
    def address(self) -> str:
        return f"{self.name}@{DOMAIN}"


# IMAP connections one account may hold from one address (Dovecot's own default).
MAX_USERIP_CONNECTIONS = 10


def wait_for_port(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
            return True
        time.sleep(0.02)  # polling a port that is not open yet; bounded by the deadline
    return False


class MailStack:
    server = "dovecot"

    def __init__(
        self,
        *,
        postfix: bool | None = None,
        keep_dir: bool = False,
        max_userip_connections: int = MAX_USERIP_CONNECTIONS,
    ) -> None:
        """`max_userip_connections`: the IMAP connections one account may hold from one
        address (Dovecot's limit; the benchmarks raise it for their many participants)."""
        self.max_userip_connections = max_userip_connections
        self.is_root = os.geteuid() == 0
        self.has_postfix = (postfix if postfix is not None else True) and self.is_root
        if not self.is_root:
            self.why_no_postfix = "not running as root: Postfix needs root; using LMTP delivery"
        elif not self.has_postfix:
            self.why_no_postfix = "Postfix disabled by the caller"
        else:
            self.why_no_postfix = ""
        self.keep_dir = keep_dir
        self.root = Path(tempfile.mkdtemp(prefix="mailbus-stack-"))
        self._dovecot: subprocess.Popen[bytes] | None = None
        self._postfix: subprocess.Popen[bytes] | None = None
        self._relay: LmtpRelay | None = None
        self._users: dict[str, User] = {}
        # Dovecot runs as an unprivileged user in its "non-root" mode, also when we are
        # root: then every path is owned by the system's dovecot user.
        self.run_user = "dovecot" if self.is_root else pwd.getpwuid(os.geteuid()).pw_name
        self.run_group = "dovecot" if self.is_root else grp.getgrgid(os.getegid()).gr_name
        self.imap_port = free_port()
        self.imaps_port = free_port()
        self.smtp_port = free_port()
        self.smtps_port = free_port()
        self.sieve_port = free_port()
        trustme = require("trustme", "test", "the loopback mail stack's certificates")
        self.ca = trustme.CA()
        self.dovecot_dir = self.root / "dovecot"
        self.postfix_dir = self.root / "postfix"
        self.ca_file = str(self.root / "ca.pem")
        self.dovecot_log = self.root / "dovecot.log"
        self.postfix_log = self.root / "postfix.log"
        self.lmtp_socket = self.dovecot_dir / "run" / "lmtp"

    # -- URLs ---------------------------------------------------------------------------
    @property
    def imap_url(self) -> str:
        return f"imap://{HOST}:{self.imap_port}"

    @property
    def imaps_url(self) -> str:
        return f"imaps://{HOST}:{self.imaps_port}"

    @property
    def sieve_url(self) -> str:
        """ManageSieve (RFC 5804) with STARTTLS, as Dovecot's Pigeonhole serves it."""
        return f"sieve://{HOST}:{self.sieve_port}"

    @property
    def smtp_url(self) -> str:
        return f"smtp://{HOST}:{self.smtp_port}"

    @property
    def smtps_url(self) -> str:
        return f"smtps://{HOST}:{self.smtps_port}"

    # -- life cycle ---------------------------------------------------------------------
    def __enter__(self) -> MailStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        self._write_certificates()
        self._write_imap_config()
        self.start_imap()
        if self.has_postfix:
            self._write_postfix_config()
        self.start_smtp()

    @property
    def smtp_server(self) -> str:
        return "postfix" if self.has_postfix else "lmtp-relay"

    def start_smtp(self) -> None:
        if self.has_postfix:
            self.start_postfix()
            return
        if self._relay is not None:
            self._relay.start()  # a restart keeps the ports clients were given
            return
        for attempt in range(3):
            relay = LmtpRelay(
                HOST,
                self.smtp_port,
                self.smtps_port,
                self.cert_file,
                self.key_file,
                self.lmtp_socket,
                self._check_login,
                REJECTED,
                DEFERRED,
            )
            try:
                relay.start()
            except OSError:
                if attempt == 2:
                    raise
                # Taken between choosing and binding: nobody knows these ports yet.
                self.smtp_port, self.smtps_port = free_port(), free_port()
                continue
            self._relay = relay
            return

    def stop_smtp(self) -> None:
        if self.has_postfix:
            self.stop_postfix()
        elif self._relay is not None:
            self._relay.stop()

    def _check_login(self, username: str, password: str) -> bool:
        user = self._users.get(username.partition("@")[0])
        return user is not None and user.address == username and user.password == password

    def stop(self) -> None:
        errors: list[BaseException] = []
        for stop in (self.stop_smtp, self.stop_imap):
            try:
                stop()
            except BaseException as exc:  # stop the other server all the same
                errors.append(exc)
        if not self.keep_dir:
            shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise errors[0]

    # -- certificates -------------------------------------------------------------------
    def _write_certificates(self) -> None:
        self.root.chmod(0o755)
        self.ca.cert_pem.write_to_path(self.ca_file)
        cert = self.ca.issue_cert(HOST, "localhost", DOMAIN)
        self.cert_file = self.root / "server.pem"
        self.key_file = self.root / "server.key"
        cert.cert_chain_pems[0].write_to_path(str(self.cert_file))
        for extra in cert.cert_chain_pems[1:]:
            extra.write_to_path(str(self.cert_file), append=True)
        cert.private_key_pem.write_to_path(str(self.key_file))
        self.key_file.chmod(0o640)
        self._chown(self.cert_file, self.key_file)

    def _chown(self, *paths: Path) -> None:
        if self.is_root:
            for path in paths:
                shutil.chown(path, self.run_user, self.run_group)

    # -- the IMAP server (Dovecot here; a subclass runs another) -------------------------
    def _write_imap_config(self) -> None:
        self._write_dovecot_config()

    def start_imap(self, timeout: float = 15.0) -> None:
        """Start the IMAP server (and its LMTP and ManageSieve) if it is not running."""
        self.start_dovecot(timeout)

    def stop_imap(self, timeout: float = 10.0) -> None:
        self.stop_dovecot(timeout)

    @property
    def imap_running(self) -> bool:
        return self.dovecot_running

    @property
    def imap_log(self) -> Path:
        return self.dovecot_log

    def server_pids(self) -> list[int]:
        """The process ids of the servers' masters (the IMAP server's and Postfix's)."""
        return [p.pid for p in (self._imap_process(), self._postfix) if p is not None]

    def _imap_process(self) -> subprocess.Popen[bytes] | None:
        return self._dovecot

    def postfix_sasl_config(self) -> str:
        """main.cf lines that make Postfix check SMTP logins against the IMAP server's
        accounts: through Dovecot's auth socket here."""
        auth_socket = self.dovecot_dir / "run" / "auth-postfix"
        return f"smtpd_sasl_type = dovecot\nsmtpd_sasl_path = {auth_socket}"

    # -- Dovecot ------------------------------------------------------------------------
    def _write_dovecot_config(self) -> None:
        d = self.dovecot_dir
        for sub in ("", "run", "state", "mail", "home"):
            (d / sub).mkdir(parents=True, exist_ok=True)
            (d / sub).chmod(0o755)
        # One passwd-file per user (path with %n): a new user is a new file, so
        # Dovecot never answers from a copy of the file read before the user existed.
        self.users_dir = d / "users"
        self.users_dir.mkdir(exist_ok=True)
        self._chown(d, d / "run", d / "state", d / "mail", d / "home", self.users_dir)
        for log in (self.dovecot_log,):
            log.touch()
            self._chown(log)
        config = dovecot_conf(self)
        self.dovecot_conf = d / "dovecot.conf"
        self.dovecot_conf.write_text(config)
        self._chown(self.dovecot_conf)

    def start_dovecot(self, timeout: float = 15.0) -> None:
        if self._dovecot is not None and self._dovecot.poll() is None:
            return
        kwargs: dict[str, object] = {}
        if self.is_root:
            kwargs = {"user": self.run_user, "group": self.run_group, "extra_groups": []}
        self._dovecot = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.dovecot_conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "dovecot.stderr", "ab"),  # noqa: SIM115
            start_new_session=True,
            **kwargs,  # type: ignore[call-overload]
        )
        deadline = time.monotonic() + timeout
        ready = all(
            wait_for_port(p, deadline) for p in (self.imap_port, self.imaps_port, self.sieve_port)
        ) and self._wait_for_path(self.lmtp_socket, deadline)
        if not ready or self._dovecot.poll() is not None:
            raise MailStackError(
                "Dovecot did not start:\n"
                + log_tail(self.root / "dovecot.stderr")
                + "\n"
                + log_tail(self.dovecot_log)
            )

    def stop_dovecot(self, timeout: float = 10.0) -> None:
        self._stop_process(self._dovecot, timeout)
        self._dovecot = None

    @property
    def dovecot_running(self) -> bool:
        return self._dovecot is not None and self._dovecot.poll() is None

    @staticmethod
    def _wait_for_path(path: Path, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if path.exists():
                return True
            time.sleep(0.02)  # bounded wait for a socket file to appear
        return False

    @staticmethod
    def _stop_process(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
        if proc is None or proc.poll() is not None:
            return
        # Both masters run in their own session: signal that process group only.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)

    # -- Postfix ------------------------------------------------------------------------
    def _write_postfix_config(self) -> None:
        p = self.postfix_dir
        etc, spool, data = p / "etc", p / "spool", p / "data"
        for sub in (etc, spool, data):
            sub.mkdir(parents=True, exist_ok=True)
        shutil.chown(data, "postfix", "postfix")
        self.postfix_log.touch()
        main_cf = postfix_main_cf(self, spool, data)
        (etc / "main.cf").write_text(main_cf)
        master_cf = postfix_master_cf(self)
        (etc / "master.cf").write_text(master_cf)
        self.postfix_etc = etc

    def start_postfix(self, timeout: float = 20.0) -> None:
        if not self.has_postfix or (self._postfix is not None and self._postfix.poll() is None):
            return
        env = {**os.environ, "MAIL_CONFIG": str(self.postfix_etc)}
        # `postfix check` creates the queue directories with their owners; then the
        # master runs in the foreground (-d) as our child, in a session of its own, so
        # stopping it by its process group stops every Postfix process of this stack.
        # (`postfix start` / `start-fg` would detach the master into its own session.)
        check = subprocess.run(
            [POSTFIX, "-c", str(self.postfix_etc), "check"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check.returncode != 0:
            raise MailStackError(f"postfix check failed:\n{check.stdout}{check.stderr}")
        self._postfix = subprocess.Popen(
            [POSTFIX_MASTER, "-d", "-c", str(self.postfix_etc)],
            stdin=subprocess.DEVNULL,
            stdout=open(self.root / "postfix.stdout", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        deadline = time.monotonic() + timeout
        if not wait_for_port(self.smtp_port, deadline) or self._postfix.poll() is not None:
            raise MailStackError(
                "Postfix did not start:\n"
                + log_tail(self.root / "postfix.stdout")
                + "\n"
                + log_tail(self.postfix_log)
            )
        wait_for_port(self.smtps_port, deadline)

    def stop_postfix(self, timeout: float = 15.0) -> None:
        self._stop_process(self._postfix, timeout)
        self._postfix = None

    @property
    def postfix_running(self) -> bool:
        return self._postfix is not None and self._postfix.poll() is None

    # -- users and mail -----------------------------------------------------------------
    def add_user(self, name: str | None = None, password: str | None = None) -> User:
        """A fresh user with an empty inbox (Dovecot rereads its passwd-file)."""
        user = User(name or f"u{secrets.token_hex(5)}", password or secrets.token_urlsafe(12))
        if not user.name.isalnum():
            raise ValueError(f"user name {user.name!r} must be letters and digits")
        if user.name in self._users:
            raise ValueError(f"user {user.name} exists")
        path = self.users_dir / user.name
        path.write_text(f"{user.address}:{{PLAIN}}{user.password}\n")
        self._chown(path)
        self._users[user.name] = user
        return user

    def deliver(self, recipient: str, data: bytes, sender: str = f"test@{DOMAIN}") -> None:
        """Deliver raw bytes straight into Dovecot over LMTP (bypassing Postfix)."""
        client = smtplib.LMTP(str(self.lmtp_socket))
        try:
            client.sendmail(sender, [recipient], data)
        finally:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                client.quit()

    def postfix_queue(self) -> str:
        """Postfix's queue as `postqueue -p` lists it ("Mail queue is empty" when drained)."""
        if not self.has_postfix:
            return "(no Postfix: the LMTP relay keeps no queue)"
        done = subprocess.run(
            ["postqueue", "-c", str(self.postfix_etc), "-p"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return (done.stdout + done.stderr).strip()

    def wait_for_empty_queue(self, timeout: float) -> bool:
        """Poll Postfix's queue until it is empty (True) or `timeout` passes (False):
        mail it deferred while Dovecot was down has then been handed to Dovecot."""
        if not self.has_postfix:
            return True
        deadline = time.monotonic() + timeout
        while "Mail queue is empty" not in self.postfix_queue():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)  # polling postqueue, bounded by the deadline
        return True

    def postfix_log_of_queue(self) -> str:
        """Every Postfix log line about the mail still in its queue: why and when it was
        deferred, and whether it was tried again."""
        queue = self.postfix_queue()
        ids = [ln.split()[0].rstrip("*!") for ln in queue.splitlines()[1:] if ln[:1].isalnum()]
        try:
            log = self.postfix_log.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"({exc})"
        return "\n".join(ln for ln in log if any(i in ln for i in ids))

    def maildir_files(self, user: User) -> list[tuple[str, str, bytes]]:
        """(folder, file name, bytes) of every file of the user's inbox maildir (tmp/,
        new/, cur/): what Dovecot really saved, also while it is stopped."""
        root = self.dovecot_dir / "mail" / user.address
        files: list[tuple[str, str, bytes]] = []
        for sub in ("tmp", "new", "cur"):
            folder = root / sub
            for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
                with contextlib.suppress(OSError):  # moved from new/ to cur/ meanwhile
                    files.append((sub, name, (folder / name).read_bytes()))
        return files

    def uidlist(self, user: User) -> str:
        """Dovecot's UID -> file name map of the user's inbox."""
        path = self.dovecot_dir / "mail" / user.address / "dovecot-uidlist"
        try:
            return path.read_text(errors="replace")
        except OSError as exc:
            return f"({exc})"

    def logs(self, lines: int = 60) -> str:
        return (
            f"--- {self.server} ---\n"
            + log_tail(self.imap_log, lines)
            + "\n--- postfix ---\n"
            + log_tail(self.postfix_log, lines)
        )

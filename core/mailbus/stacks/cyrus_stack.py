"""A throw-away Cyrus IMAP stack on loopback, with the interface of mailstack.MailStack:
Cyrus IMAP 3.6 (IMAP, IMAPS, LMTP, ManageSieve through timsieved) and Postfix (SMTP with
STARTTLS, SMTPS, AUTH through SASL) delivering into Cyrus over LMTP.

    with CyrusStack() as stack:
        user = stack.add_user()
        ... stack.smtps_url, stack.imaps_url, stack.sieve_url, stack.ca_file

Cyrus's master runs in the foreground as our child (as the system's `cyrus` user when
we are root, else as ourselves) with its own imapd.conf, cyrus.conf, databases,
partition and Sieve directory under the stack's temporary directory; every service is
started with `-C` on that imapd.conf, so nothing of the system's Cyrus is read or
written. Accounts live in the stack's own SASL database (saslpasswd2 -f), and Postfix
checks SMTP logins against a copy of it that its user can read. Mailboxes are created
by the stack's admin over IMAP, as `cyradm` does. Cyrus logs only to syslog: `logs()`
gives the master's stderr and Postfix's log.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from mailbus.stacks.cyrus_config import SERVERNAME, cyrus_conf, imapd_conf, postfix_sasl_conf
from mailbus.stacks.loopback import HOST, log_tail
from mailbus.stacks.mail_config import DOMAIN
from mailbus.stacks.mailstack import (
    MAX_USERIP_CONNECTIONS,
    MailStack,
    MailStackError,
    User,
    wait_for_port,
)

CYRUS_BIN = Path("/usr/lib/cyrus/bin")
CYRUS_MASTER = CYRUS_BIN / "master"  # cyrus-common
# imapd and idled: the cyrus-imapd package, or (beside dovecot-imapd, which it conflicts
# with) its files unpacked by scripts/install-cyrus-imapd.
IMAPD_DIRS = (CYRUS_BIN, Path("/opt/mailbus-cyrus-imapd/usr/lib/cyrus/bin"))


def imapd_dir() -> Path:
    """Where Cyrus's imapd and idled are; MailStackError when they are nowhere."""
    for folder in IMAPD_DIRS:
        if (folder / "imapd").is_file() and (folder / "idled").is_file():
            return folder
    if not CYRUS_MASTER.is_file():
        raise MailStackError("Cyrus IMAP is not installed: install cyrus-common and cyrus-admin")
    raise MailStackError(
        "Cyrus's imapd is not installed: run scripts/install-cyrus-imapd (it unpacks "
        "cyrus-imapd beside dovecot-imapd, which the package conflicts with)"
    )


SASLPASSWD2 = shutil.which("saslpasswd2") or "/usr/sbin/saslpasswd2"


class CyrusStack(MailStack):
    server = "cyrus"

    def __init__(
        self,
        *,
        postfix: bool | None = None,
        keep_dir: bool = False,
        max_userip_connections: int = MAX_USERIP_CONNECTIONS,
        suppress_capabilities: tuple[str, ...] = (),
    ) -> None:
        """`suppress_capabilities`: extensions Cyrus does not announce (as a server
        without them: LIST-STATUS, IDLE, CONDSTORE ...), to prove the fallbacks."""
        self.suppress_capabilities = suppress_capabilities
        super().__init__(
            postfix=postfix, keep_dir=keep_dir, max_userip_connections=max_userip_connections
        )
        if self.is_root:
            self.run_user, self.run_group = "cyrus", "mail"
        self._cyrus: subprocess.Popen[bytes] | None = None
        # Cyrus fsyncs every delivery and has no switch against it (Dovecot runs with
        # mail_fsync = never here): its databases and partition live in memory when
        # the machine has /dev/shm, as a throw-away test server may.
        shm = Path("/dev/shm")
        memory = shm.is_dir() and os.access(shm, os.W_OK)
        self.cyrus_dir = (
            Path(tempfile.mkdtemp(prefix="mailbus-cyrus-", dir=shm))
            if memory
            else self.root / "cyrus"
        )
        self.imapd_conf = self.cyrus_dir / "imapd.conf"
        self.cyrus_conf_file = self.cyrus_dir / "cyrus.conf"
        self.sasldb = self.cyrus_dir / "sasldb2"
        # Debian's Postfix reads $config_directory/sasl/smtpd.conf whatever
        # cyrus_sasl_config_path says.
        self.postfix_sasl_dir = self.postfix_dir / "etc" / "sasl"
        self.postfix_sasldb = self.postfix_sasl_dir / "sasldb2"
        self.cyrus_stderr = self.root / "cyrus.stderr"
        self.lmtp_socket = self.cyrus_dir / "socket" / "lmtp"
        # The global admin: creates and deletes mailboxes, sets quotas.
        self.admin_name = "cyrusadmin"
        self.admin_password = secrets.token_urlsafe(16)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if not self.keep_dir and not self.cyrus_dir.is_relative_to(self.root):
                shutil.rmtree(self.cyrus_dir, ignore_errors=True)

    # -- the IMAP server --------------------------------------------------------------
    def _write_imap_config(self) -> None:
        self.imapd_dir = imapd_dir()
        c = self.cyrus_dir
        # config/socket: where each IDLE-ing imapd binds the socket idled signals it on
        # (fixed below the configdirectory, whatever idlesocket says).
        for sub in ("", "config", "config/socket", "partition", "sieve", "socket"):
            (c / sub).mkdir(parents=True, exist_ok=True)
            (c / sub).chmod(0o755)
        self.imapd_conf.write_text(imapd_conf(self))
        self.cyrus_conf_file.write_text(cyrus_conf(self))
        self.cyrus_stderr.touch()
        # The admin has no domain: a global admin, in the server's SASL realm.
        self._saslpasswd(self.sasldb, self.admin_name, self.admin_password, SERVERNAME)
        self._chown(
            c, *(c / s for s in ("config", "config/socket", "partition", "sieve", "socket"))
        )
        self._chown(self.imapd_conf, self.cyrus_conf_file, self.sasldb, self.cyrus_stderr)

    def start_imap(self, timeout: float = 15.0) -> None:
        if self._cyrus is not None and self._cyrus.poll() is None:
            return
        kwargs: dict[str, object] = {}
        if self.is_root:
            kwargs = {"user": self.run_user, "group": self.run_group, "extra_groups": []}
        self._cyrus = subprocess.Popen(
            [
                str(CYRUS_MASTER),
                *("-C", str(self.imapd_conf), "-M", str(self.cyrus_conf_file)),
                *("-p", str(self.cyrus_dir / "master.pid"), "-D"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.cyrus_stderr, "ab"),  # noqa: SIM115
            cwd=self.cyrus_dir,
            start_new_session=True,
            **kwargs,  # type: ignore[call-overload]
        )
        deadline = time.monotonic() + timeout
        ready = all(
            wait_for_port(p, deadline) for p in (self.imap_port, self.imaps_port, self.sieve_port)
        ) and self._wait_for_path(self.lmtp_socket, deadline)
        if not ready or self._cyrus.poll() is not None:
            raise MailStackError(
                f"Cyrus did not start (exit {self._cyrus.poll()}; it logs to syslog):\n"
                + log_tail(self.cyrus_stderr)
            )

    def stop_imap(self, timeout: float = 10.0) -> None:
        self._stop_process(self._cyrus, timeout)
        self._cyrus = None

    @property
    def imap_running(self) -> bool:
        return self._cyrus is not None and self._cyrus.poll() is None

    @property
    def imap_log(self) -> Path:
        return self.cyrus_stderr

    def _imap_process(self) -> subprocess.Popen[bytes] | None:
        return self._cyrus

    # -- Postfix ------------------------------------------------------------------------
    def postfix_sasl_config(self) -> str:
        return (
            "smtpd_sasl_type = cyrus\n"
            "smtpd_sasl_path = smtpd\n"
            f"cyrus_sasl_config_path = {self.postfix_sasl_dir}"
        )

    def _write_postfix_config(self) -> None:
        super()._write_postfix_config()
        self.postfix_sasl_dir.mkdir(parents=True, exist_ok=True)
        (self.postfix_sasl_dir / "smtpd.conf").write_text(postfix_sasl_conf(self))
        # Postfix's smtpd reads its own copy: Cyrus's database stays its user's alone.
        for user in self._users.values():
            self._saslpasswd(self.postfix_sasldb, user.name, user.password, DOMAIN)
        # (The admin too: the database exists before the first user.)
        self._saslpasswd(self.postfix_sasldb, self.admin_name, self.admin_password, SERVERNAME)
        shutil.chown(self.postfix_sasldb, "postfix", "postfix")

    # -- users and mail -----------------------------------------------------------------
    def add_user(self, name: str | None = None, password: str | None = None) -> User:
        """A fresh account (in SASL) with an empty inbox (created by the admin)."""
        user = self._account(name, password)
        with self.admin() as admin:
            admin.create_folder(self.inbox_of(user))
        self._users[user.name] = user
        return user

    def add_users(self, count: int) -> list[User]:
        """`count` fresh accounts whose inboxes are made at the same moment, each by an
        admin connection of its own (so by as many Cyrus processes): how a busy server
        makes them, and what once gave two users one mailbox (see cyrus_config.py)."""
        users = [self._account(None, None) for _ in range(count)]
        admins = [self.admin() for _ in users]
        try:
            for admin, user in zip(admins, users, strict=True):
                admin.create_folder(self.inbox_of(user))
                self._users[user.name] = user
        finally:
            for admin in admins:
                admin.logout()
        return users

    def _account(self, name: str | None, password: str | None) -> User:
        user = User(name or f"u{secrets.token_hex(5)}", password or secrets.token_urlsafe(12))
        if not user.name.isalnum():
            raise ValueError(f"user name {user.name!r} must be letters and digits")
        if user.name in self._users:
            raise ValueError(f"user {user.name} exists")
        self._saslpasswd(self.sasldb, user.name, user.password, DOMAIN)
        if self.postfix_sasldb.exists():
            self._saslpasswd(self.postfix_sasldb, user.name, user.password, DOMAIN)
        return user

    @staticmethod
    def inbox_of(user: User) -> str:
        """The user's INBOX as the admin names it (virtual domains, `/` separator)."""
        return f"user/{user.name}@{DOMAIN}"

    def admin(self) -> Any:
        """An IMAP client logged in as the admin (imapclient.IMAPClient; a context
        manager that logs out)."""
        import imapclient

        client = imapclient.IMAPClient(HOST, self.imap_port, ssl=False, timeout=10)
        client.login(self.admin_name, self.admin_password)
        return client

    def set_quota(self, user: User, storage_kb: int) -> None:
        """Limit the user's mailboxes to `storage_kb` (delivery over it is refused)."""
        import imapclient

        quota = imapclient.imapclient.Quota(self.inbox_of(user), "STORAGE", 0, storage_kb)
        with self.admin() as admin:
            admin.set_quota([quota])

    def _saslpasswd(self, db: Path, name: str, password: str, realm: str) -> None:
        done = subprocess.run(
            [SASLPASSWD2, "-p", "-c", "-f", str(db), "-u", realm, name],
            input=password.encode(),
            capture_output=True,
            timeout=30,
        )
        if done.returncode != 0:
            raise MailStackError(
                f"saslpasswd2 could not add {name}: {done.stderr.decode(errors='replace')}"
            )
        if db == self.sasldb:
            self._chown(db)

    def maildir_files(self, user: User) -> list[tuple[str, str, bytes]]:
        """(folder, file name, bytes) of every message file of the user's INBOX: what
        Cyrus really saved (one file per message, named by its UID)."""
        found: list[tuple[str, str, bytes]] = []
        partition = self.cyrus_dir / "partition"
        for folder in sorted(partition.glob(f"domain/*/{DOMAIN}/*/user/{user.name}")):
            for path in sorted(folder.iterdir()):
                if path.name.endswith(".") and path.is_file():
                    found.append(("INBOX", path.name, path.read_bytes()))
        return found

    def uidlist(self, user: User) -> str:
        return "(Cyrus keeps its UIDs in cyrus.index, one file per message named by UID)"

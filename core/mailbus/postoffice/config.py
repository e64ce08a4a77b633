"""The PostOffice daemon's settings and what it reports about a mailbox."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mailbus.postoffice import lifecycle
from mailbus.postoffice import store as st
from mailbus.postoffice.protocol import (
    DEFAULT_PORT,
)
from mailbus.tls import is_loopback


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the daemon can be told. Limits are refused with a code (see docs)."""

    store_path: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    sync: st.SyncMode = "full"
    max_letter_bytes: int = 16 * 1024 * 1024
    max_name_bytes: int = 255
    max_connections: int = 256
    max_boxes_per_connection: int = 64  # boxes one connection may create
    max_boxes: int = 100_000
    max_letters_per_box: int = 100_000
    when_full: lifecycle.WhenFull = "drop-oldest"  # at max_letters_per_box; see lifecycle
    expire_idle_s: float = lifecycle.DEFAULT_EXPIRE_IDLE_S  # 0: boxes never expire
    comm_timeout_s: float = 10.0  # silence allowed inside a command
    auth_delay_s: float = 0.2  # first back-off after a wrong password, doubling
    auth_delay_max_s: float = 5.0
    auth_max_waiting: int = 8  # connections of one peer host in back-off at once
    auth_forget_s: float = 60.0  # a peer's failures are forgotten after this quiet
    hash_params: st.HashParams = field(default_factory=st.HashParams)
    hash_workers: int = 2  # threads running scrypt
    # scrypt jobs waiting beyond those; more are refused at once. None: max_connections
    # (a connection has at most one job in hand, so legitimate bursts such as every
    # participant reconnecting after a restart are never refused); lower it to refuse
    # instead of queueing.
    hash_queue: int | None = None
    max_buffer_bytes: int = 1024 * 1024  # input a client may send ahead of the replies
    # Letters and new boxes are refused while the store's disk has less free (see
    # store.DEFAULT_RESERVE_BYTES): what deletes and checkpoints need on a full disk.
    store_reserve_bytes: int = st.DEFAULT_RESERVE_BYTES
    # TLS: the same protocol inside it. With a client CA, clients must show a certificate
    # it signed (mutual TLS).
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    # Without TLS, a password's digest crosses the network as is (docs/postoffice.md):
    # plain connections from other hosts are refused unless this says otherwise.
    allow_plain_remote: bool = False

    def plain_refused(self, peer_host: str) -> bool:
        """Whether a connection from `peer_host` is refused for being plain."""
        return self.tls_cert is None and not self.allow_plain_remote and not is_loopback(peer_host)


@dataclass(frozen=True, slots=True)
class BoxStatus:
    name: str
    letters: int
    checked_out: bool
    holder: str = ""  # the peer address of the connection holding it
    dropped: int = 0  # oldest letters dropped at the cap since the daemon started
    idle_s: float | None = None  # how long nobody has held it (None: held now)

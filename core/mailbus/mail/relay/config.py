"""Where a host relay lives: its socket and its state file, both named after the account
so that the relay and its participants, reading the same options file, agree.

    [mail]
    share = "relay"                        # receive from the host relay
    relay-socket = "/run/user/1000/mailbus/mail/relay-<account>.sock"   # the default
    relay-queue-bytes = 16777216           # a slower participant is cut off past this

The default socket is under $XDG_RUNTIME_DIR (else /tmp/mailbus-<uid>), in a directory
only the user may enter: whoever connects gets every email of the account.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mailbus.errors import ConfigError
from mailbus.options import Options

# sun_path is 108 bytes on Linux, NUL included.
MAX_SOCKET_PATH_BYTES = 107
DEFAULT_QUEUE_BYTES = 16 * 1024 * 1024
DEFAULT_RING_BYTES = 16 * 1024 * 1024


def account_key(options: Options, mailbox: str) -> str:
    """A short name for (server, user, mailbox), safe in a file name whatever the user
    name holds."""
    raw = f"{options.url_imap}\0{options.username}\0{mailbox}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_absolute():
        return Path(base) / "mailbus"
    return Path(f"/tmp/mailbus-{os.getuid()}")


def check_socket_path(key: str, value: str) -> Path:
    path = Path(value)
    if "\0" in value or not path.is_absolute():
        raise ConfigError(key, f"expected an absolute path, got {value!r}")
    if len(os.fsencode(value)) > MAX_SOCKET_PATH_BYTES:
        raise ConfigError(
            key, f"a Unix socket path is at most {MAX_SOCKET_PATH_BYTES} bytes: {value!r}"
        )
    return path


def socket_path(options: Options, section: Mapping[str, Any]) -> Path:
    if "relay-socket" in section:
        return check_socket_path("mail.relay-socket", section["relay-socket"])
    mailbox = section.get("mailbox", "INBOX")
    default = runtime_dir() / f"relay-{account_key(options, mailbox)}.sock"
    return check_socket_path("mail.relay-socket", str(default))


def state_dir_default() -> Path:
    base = os.environ.get("XDG_STATE_HOME")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "mailbus"


def check_relay_keys(section: Mapping[str, Any]) -> None:
    """The keys of `share = "relay"` (the mode itself is checked with the other modes)."""
    if "start-uid" in section:
        # The relay decides where reading starts (its state file); a participant cannot.
        raise ConfigError("mail.start-uid", 'not with share = "relay" (the relay reads)')
    if section.get("relay-queue-bytes", DEFAULT_QUEUE_BYTES) < 1024:
        raise ConfigError("mail.relay-queue-bytes", "must be >= 1024")

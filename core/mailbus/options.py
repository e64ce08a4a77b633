"""Options: from a TOML file, then environment variables, which win.

File keys (the reference's names): `transport` ("inprocess", "email", "postoffice"),
`intraprocess` (bool, the reference's switch: true means transport "inprocess"),
`url-smtp`, `url-imap`, `username`, `password`, `from`, `polling-period-ms`,
`tls-verify`, `ca-file`, `name`, `announce-period-s`, and a `[recipients]` table with
`to`, `cc`, `bcc` lists.
Further tables (such as `[postoffice]`, `[outbox]` or `[signing]`) are kept for the
parts that read them; `[signing]` is checked here (mailbus.signing.config).
Environment: MAILBUS_CONFIG_FILE names the file; MAILBUS_<KEY> (upper case, `-`
as `_`) overrides a key, MAILBUS_PASSWORD the password, so that it need not be written
in the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mailbus.errors import ConfigError, InvalidNameError
from mailbus.names import check_address, check_name
from mailbus.signing.config import signing_config

TRANSPORTS = ("inprocess", "email", "postoffice")
_SCALAR_KEYS = {
    "transport": str,
    "intraprocess": bool,
    "url-smtp": str,
    "url-imap": str,
    "username": str,
    "password": str,
    "from": str,
    "polling-period-ms": float,
    "tls-verify": bool,
    "ca-file": str,
    "name": str,
    "announce-period-s": float,
}
_RECIPIENT_KEYS = ("to", "cc", "bcc")
# Tables that other parts read; a table not listed here is a typo, reported as such
# (a misspelt [outbox] would otherwise silently turn durability off).
KNOWN_SECTIONS = {
    "outbox",
    "postoffice",
    "mail",
    "stem",
    "sessions",
    "workbench",
    "broker",
    "signing",
    "foxglove",
}


@dataclass(frozen=True, slots=True)
class Recipients:
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    bcc: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Options:
    transport: str = "inprocess"
    url_smtp: str = ""
    url_imap: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    from_address: str = ""
    recipients: Recipients = field(default_factory=Recipients)
    polling_period_ms: float = 10.0
    tls_verify: bool = True
    ca_file: str = ""
    # This participant's name in announcements; "" means `program-pid`.
    name: str = ""
    # Seconds between participant announcements (mailbus.presence); 0: none.
    announce_period_s: float = 0.0
    # Tables this module does not know, for other parts (postoffice, outbox, ...).
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def address(self) -> str:
        """The address this participant sends from."""
        return (
            self.from_address
            or (self.username if "@" in self.username else "")
            or ("mailbus@localhost")
        )


def _parse_bool(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(key, f"expected true or false, got {text!r}")


def _check_type(key: str, value: object, kind: type) -> object:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(key, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def redact_url(url: str) -> str:
    """`url` fit for a message: whatever could be a password is replaced by `***`.

    The userinfo is everything between `//` and the LAST `@` (a password may itself
    hold `@`, `/` or `:`); its user part stays. Without `//`, everything up to the last
    `@` goes. Over-redacting an odd path is harmless; showing a password is not.
    """
    if "@" not in url:
        return url
    scheme, sep, rest = url.partition("//")
    if not sep:
        return "***@" + url.rpartition("@")[2]
    userinfo, _, host = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}:***" if colon and "/" not in user else "***"
    return f"{scheme}//{shown}@{host}"


def check_url(key: str, url: str, schemes: tuple[str, ...]) -> str:
    """Check a server URL; every message shows it with `redact_url`."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a port that is not a number
    except ValueError:
        raise ConfigError(key, f"not a valid URL: {shown!r}") from None
    if parts.scheme not in schemes:
        raise ConfigError(key, f"scheme must be one of {', '.join(schemes)}, got {shown!r}")
    if not parts.hostname:
        raise ConfigError(key, f"no host in URL {shown!r}")
    if "@" in url:
        # Credentials in a URL end up in logs and traces; keep them in their own keys.
        # Any `@` counts: `smtp://user:pa/ss@host` splits as host `user`, port `pa`.
        raise ConfigError(
            key, f"must not contain credentials; use username and password (got {shown!r})"
        )
    if port is not None and not 0 < port < 65536:
        raise ConfigError(key, f"port out of range in {shown!r}")
    return url


def _addresses(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(key, "expected a list of addresses")
    try:
        return tuple(check_address(v) for v in value)
    except InvalidNameError as exc:
        raise ConfigError(key, str(exc)) from None


def load_options(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Options:
    """Options from the TOML file (`path`, else $MAILBUS_CONFIG_FILE, else none) and the
    environment. Raise ConfigError naming the key that is missing or malformed."""
    env = os.environ if environ is None else environ
    path = path or env.get("MAILBUS_CONFIG_FILE") or None
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError("MAILBUS_CONFIG_FILE", f"no such file: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("MAILBUS_CONFIG_FILE", f"{path} is not valid TOML: {exc}") from None
        except UnicodeDecodeError:
            raise ConfigError("MAILBUS_CONFIG_FILE", f"{path} is not UTF-8 text") from None
        except OSError as exc:  # a directory, no permission, ...
            why = exc.strerror or type(exc).__name__
            raise ConfigError("MAILBUS_CONFIG_FILE", f"cannot read {path}: {why}") from None
    return options_from_mapping(raw, env)


def options_from_mapping(raw: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Options:
    env = {} if env is None else env
    values: dict[str, Any] = {}
    sections: dict[str, Mapping[str, Any]] = {}
    recipients_raw: Mapping[str, Any] = {}
    for key, value in raw.items():
        if key in _SCALAR_KEYS:
            values[key] = _check_type(key, value, _SCALAR_KEYS[key])
        elif key == "recipients":
            if not isinstance(value, dict):
                raise ConfigError(key, "expected a table with to, cc, bcc")
            unknown = set(value) - set(_RECIPIENT_KEYS)
            if unknown:
                raise ConfigError(f"recipients.{sorted(unknown)[0]}", "unknown key")
            recipients_raw = value
        elif isinstance(value, dict):
            if key not in KNOWN_SECTIONS:
                known = ", ".join(sorted({"recipients", *KNOWN_SECTIONS}))
                raise ConfigError(key, f"unknown table (known tables: {known})")
            sections[key] = value
        else:
            raise ConfigError(key, "unknown key")
    for key, kind in _SCALAR_KEYS.items():
        env_name = "MAILBUS_" + key.upper().replace("-", "_")
        if env_name in env:
            text = env[env_name]
            if kind is bool:
                values[key] = _parse_bool(env_name, text)
            elif kind is float:
                try:
                    values[key] = float(text)
                except ValueError:
                    raise ConfigError(env_name, f"expected a number, got {text!r}") from None
            else:
                values[key] = text
    recipients = {}
    for key in _RECIPIENT_KEYS:
        env_name = f"MAILBUS_{key.upper()}"
        value = env.get(env_name, recipients_raw.get(key, []))
        recipients[key] = _addresses(f"recipients.{key}", value)

    transport = values.get("transport")
    if transport is None:
        transport = "inprocess" if values.get("intraprocess", True) else "email"
    if transport not in TRANSPORTS:
        raise ConfigError("transport", f"must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    period = values.get("polling-period-ms", 10.0)
    if not 0 < period <= 3_600_000:
        raise ConfigError("polling-period-ms", f"must be > 0 and at most an hour, got {period}")
    sender = values.get("from", "")
    if sender:
        try:
            check_address(sender)
        except InvalidNameError as exc:
            raise ConfigError("from", str(exc)) from None
    name = values.get("name", "")
    if name:
        try:
            check_name(name, "participant")
        except InvalidNameError as exc:
            raise ConfigError("name", str(exc)) from None
    announce = values.get("announce-period-s", 0.0)
    if not (announce == 0 or 0.1 <= announce <= 86_400):  # NaN fails too
        raise ConfigError(
            "announce-period-s", f"must be 0 (off) or 0.1 to 86400 seconds, got {announce}"
        )
    signing_config(sections)  # a bad [signing] table is an error now, not at init
    if transport == "email":
        for key in ("url-smtp", "url-imap", "username"):
            if not values.get(key):
                raise ConfigError(key, "required when transport is email")
        if not values.get("password"):
            raise ConfigError("password", "required (or set MAILBUS_PASSWORD)")
        check_url("url-smtp", values["url-smtp"], ("smtp", "smtps"))
        check_url("url-imap", values["url-imap"], ("imap", "imaps"))
    return Options(
        transport=transport,
        url_smtp=values.get("url-smtp", ""),
        url_imap=values.get("url-imap", ""),
        username=values.get("username", ""),
        password=values.get("password", ""),
        from_address=sender,
        recipients=Recipients(**recipients),
        polling_period_ms=period,
        tls_verify=values.get("tls-verify", True),
        ca_file=values.get("ca-file", ""),
        name=name,
        announce_period_s=announce,
        sections=sections,
    )

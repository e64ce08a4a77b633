"""The `[signing]` table, checked when the options are loaded (no key is read here).

[signing]
domain = "robots.example"          # d= of the signatures this participant makes
selector = "mailbus"               # s=
algorithm = "ed25519-sha256"       # or "rsa-sha256"
private-key-file = "robot.key"     # or private-key-env = "NAME_OF_A_VARIABLE"
require-signature = false          # true: unsigned or badly signed mail is skipped
max-age-s = 600                    # replay window (when signatures are required)
state-dir = "/var/lib/robot"       # where the seen Message-IDs survive a restart
seen-capacity = 100000

[signing.keyring]                  # whose signatures are trusted: the DNS record
"mailbus._domainkey.robots.example" = "v=DKIM1; k=ed25519; p=..."
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mailbus.errors import ConfigError

ALGORITHMS = ("ed25519-sha256", "rsa-sha256")
DEFAULT_MAX_AGE_S = 600.0
DEFAULT_SEEN_CAPACITY = 100_000
_KEYS: dict[str, type] = {
    "domain": str,
    "selector": str,
    "algorithm": str,
    "private-key-file": str,
    "private-key-env": str,
    "require-signature": bool,
    "max-age-s": float,
    "state-dir": str,
    "seen-capacity": int,
    "keyring": dict,
}
# RFC 6376 3.1 / RFC 1035 labels: what a selector or a domain may be.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOMAINKEY = "._domainkey."


def key_name(selector: str, domain: str) -> str:
    """The name a public key is known by: `selector._domainkey.domain`, lower case."""
    return f"{selector}{_DOMAINKEY}{domain}".lower()


@dataclass(frozen=True, slots=True)
class SigningConfig:
    domain: str = ""
    selector: str = ""
    algorithm: str = "ed25519-sha256"
    private_key_file: str = ""
    private_key_env: str = ""
    require_signature: bool = False
    max_age_s: float = DEFAULT_MAX_AGE_S
    state_dir: str = ""
    seen_capacity: int = DEFAULT_SEEN_CAPACITY
    # key_name(selector, domain) -> the DKIM key record ("v=DKIM1; k=ed25519; p=...").
    keyring: Mapping[str, str] = field(default_factory=dict)

    @property
    def signs(self) -> bool:
        return bool(self.private_key_file or self.private_key_env)

    @property
    def verifies(self) -> bool:
        """Whether received mail is checked at all (its status recorded)."""
        return self.require_signature or bool(self.keyring)


def _dns_name(key: str, value: str) -> str:
    if not (0 < len(value) <= 253 and _DNS_NAME.fullmatch(value)):
        raise ConfigError(key, f"not a valid DNS name: {value[:80]!r}")
    return value.lower()


def _keyring(raw: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, record in raw.items():
        selector, sep, domain = name.lower().partition(_DOMAINKEY)
        if not sep:
            raise ConfigError(
                f"signing.keyring.{name}", "expected a name of the form selector._domainkey.domain"
            )
        _dns_name(f"signing.keyring.{name}", selector)
        _dns_name(f"signing.keyring.{name}", domain)
        if not isinstance(record, str) or "p=" not in record or not record.isascii():
            raise ConfigError(
                f"signing.keyring.{name}", 'expected a key record "v=DKIM1; k=ed25519; p=..."'
            )
        out[key_name(selector, domain)] = record.strip()
    return out


def signing_config(sections: Mapping[str, Mapping[str, Any]]) -> SigningConfig | None:
    """The checked `[signing]` table, or None when there is none. Unknown keys, wrong
    types and values out of range are ConfigErrors naming the key."""
    raw = sections.get("signing")
    if raw is None:
        return None
    values: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _KEYS.get(key)
        if kind is None:
            raise ConfigError(f"signing.{key}", f"unknown key (known: {', '.join(sorted(_KEYS))})")
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ConfigError(f"signing.{key}", f"expected {kind.__name__}")
        values[key] = value
    algorithm = values.get("algorithm", "ed25519-sha256")
    if algorithm not in ALGORITHMS:
        raise ConfigError("signing.algorithm", f"must be one of {', '.join(ALGORITHMS)}")
    if "private-key-file" in values and "private-key-env" in values:
        raise ConfigError("signing.private-key-env", "give private-key-file or -env, not both")
    env_name = values.get("private-key-env", "")
    if env_name and not _ENV_NAME.fullmatch(env_name):
        raise ConfigError("signing.private-key-env", "expected the name of an environment variable")
    signs = bool(values.get("private-key-file") or env_name)
    domain = values.get("domain", "")
    selector = values.get("selector", "")
    if signs or domain or selector:
        for key in ("domain", "selector"):
            if not values.get(key):
                raise ConfigError(f"signing.{key}", "required to sign (with the private key)")
        domain = _dns_name("signing.domain", domain)
        selector = _dns_name("signing.selector", selector)
    max_age = values.get("max-age-s", DEFAULT_MAX_AGE_S)
    if not 1.0 <= max_age <= 30 * 86400:
        raise ConfigError("signing.max-age-s", "must be between 1 s and 30 days")
    capacity = values.get("seen-capacity", DEFAULT_SEEN_CAPACITY)
    if not 1 <= capacity <= 10_000_000:
        raise ConfigError("signing.seen-capacity", "must be between 1 and 10,000,000")
    keyring = _keyring(values.get("keyring", {}))
    require = values.get("require-signature", False)
    if require and not keyring:
        raise ConfigError(
            "signing.require-signature", "needs a [signing.keyring] to verify signatures against"
        )
    return SigningConfig(
        domain=domain,
        selector=selector,
        algorithm=algorithm,
        private_key_file=values.get("private-key-file", ""),
        private_key_env=env_name,
        require_signature=require,
        max_age_s=max_age,
        state_dir=values.get("state-dir", ""),
        seen_capacity=capacity,
        keyring=keyring,
    )

"""Signing keys: read the private key (a file or an environment variable), make new
ed25519 key pairs, and write the public half as a DKIM key record.

A private key never appears in an error message, a log line or a repr: errors say which
file or variable is wrong and how, never what it holds.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import nacl.encoding
import nacl.exceptions
import nacl.signing
from dkim.crypto import (
    UnparsableKeyError,
    parse_pem_private_key,
    parse_public_key,
)
from dkim.util import InvalidTagValueList, parse_tag_value

from mailbus.errors import ConfigError
from mailbus.signing.config import SigningConfig, key_name


@dataclass(frozen=True, slots=True)
class PrivateKey:
    """What dkimpy signs with: base64 of the 32-byte ed25519 seed, or a PEM RSA key."""

    algorithm: str
    material: bytes = field(repr=False)
    source: str = ""  # "file robot.key" or "variable NAME", for messages

    def public_record(self) -> str:
        """The DKIM key record of the public half ("v=DKIM1; k=...; p=...")."""
        if self.algorithm == "ed25519-sha256":
            verify_key = nacl.signing.SigningKey(
                self.material, encoder=nacl.encoding.Base64Encoder
            ).verify_key
            return ed25519_record(bytes(verify_key))
        raise ValueError("the public record of an RSA key comes with the key (see keygen)")


def ed25519_record(public_key: bytes) -> str:
    return "v=DKIM1; k=ed25519; p=" + base64.b64encode(public_key).decode("ascii")


def new_ed25519_key() -> tuple[PrivateKey, str]:
    """A fresh ed25519 key pair: the private key and its public DKIM key record."""
    signing_key = nacl.signing.SigningKey.generate()
    private = PrivateKey("ed25519-sha256", base64.b64encode(bytes(signing_key)))
    return private, ed25519_record(bytes(signing_key.verify_key))


def parse_private_key(algorithm: str, text: bytes, source: str) -> PrivateKey:
    """Check `text` is a private key for `algorithm`; ConfigError naming `source` if not."""
    if algorithm == "ed25519-sha256":
        material = b"".join(text.split())
        try:
            seed = base64.b64decode(material, validate=True)
            nacl.signing.SigningKey(seed)
        except (binascii.Error, ValueError, nacl.exceptions.CryptoError):
            raise ConfigError(
                "signing.private-key",
                f"{source} is not an ed25519 private key (base64 of a 32-byte seed, as "
                "`mailbus keygen` writes)",
            ) from None
        return PrivateKey(algorithm, material, source)
    try:
        parse_pem_private_key(text)
    except (UnparsableKeyError, IndexError, TypeError, ValueError):
        raise ConfigError(
            "signing.private-key",
            f"{source} is not an RSA private key in PEM (-----BEGIN RSA PRIVATE KEY-----)",
        ) from None
    return PrivateKey(algorithm, text, source)


def _read_key_file(path: Path) -> bytes:
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError("signing.private-key-file", f"no such file: {path}") from None
    except OSError as exc:
        problem = f"cannot read {path}: {exc.strerror}"
        raise ConfigError("signing.private-key-file", problem) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            "signing.private-key-file",
            f"{path} can be read by others (mode {stat.S_IMODE(mode):o}); run chmod 600 on it",
        )
    return data


def load_private_key(config: SigningConfig, environ: Mapping[str, str] | None = None) -> PrivateKey:
    """The configured private key, checked (and against the keyring when it holds this
    participant's own selector): a ConfigError says what is wrong, never the key."""
    env = os.environ if environ is None else environ
    if config.private_key_file:
        path = Path(config.private_key_file).expanduser()
        key = parse_private_key(config.algorithm, _read_key_file(path), f"file {path}")
    else:
        name = config.private_key_env
        text = env.get(name, "")
        if not text:
            raise ConfigError("signing.private-key-env", f"variable {name} is not set")
        key = parse_private_key(config.algorithm, text.encode("utf-8"), f"variable {name}")
    own = config.keyring.get(key_name(config.selector, config.domain))
    if own is not None and not _matches(key, own):
        raise ConfigError(
            "signing.keyring",
            f"the private key in {key.source} does not match the public key of "
            f"{key_name(config.selector, config.domain)} in the keyring",
        )
    return key


def _matches(key: PrivateKey, record: str) -> bool:
    try:
        tags = parse_tag_value(record.encode("ascii"))
        public = base64.b64decode(b"".join(tags.get(b"p", b"").split()))
    except (InvalidTagValueList, binascii.Error, ValueError):
        return False
    if key.algorithm == "ed25519-sha256":
        seed = base64.b64decode(key.material)
        return bytes(nacl.signing.SigningKey(seed).verify_key) == public
    try:
        private = parse_pem_private_key(key.material)
        return bool(parse_public_key(public)["modulus"] == private["modulus"])
    except (UnparsableKeyError, IndexError, TypeError, ValueError, binascii.Error):
        return False


def write_private_key(path: Path, key: PrivateKey, *, overwrite: bool = False) -> None:
    """Write `key` to `path` readable by its owner only (0600 from the start: the file is
    never briefly readable by others)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key.material + b"\n")
    finally:
        os.close(fd)

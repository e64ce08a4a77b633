"""TLS contexts for connections Mailbus makes and serves itself (PostOffice; the mail
transport's client context too). Verification is on by default: a client checks the
server's chain and name, and a server given a client CA requires a client certificate
signed by it (mutual TLS). TLS 1.2 or newer. A file that cannot be used is a
ConfigError naming the setting.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

from mailbus.errors import ConfigError


def _readable(key: str, path: str | Path) -> str:
    if not Path(path).is_file():
        raise ConfigError(key, f"no such file: {path}")
    return str(path)


def client_context(
    *,
    ca_file: str | Path = "",
    verify: bool = True,
    cert_file: str | Path = "",
    key_file: str | Path = "",
    key: str = "tls",
) -> ssl.SSLContext:
    """A client context: the system's trust store or `ca_file`; with `cert_file` (and
    `key_file`, when the key is not in it) a client certificate for mutual TLS."""
    cafile = _readable(f"{key}.ca-file", ca_file) if ca_file else None
    context = ssl.create_default_context(cafile=cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        _load_chain(context, key, cert_file, key_file)
    elif key_file:
        raise ConfigError(f"{key}.key-file", "needs cert-file too")
    return context


def server_context(
    cert_file: str | Path, key_file: str | Path = "", client_ca_file: str | Path = ""
) -> ssl.SSLContext:
    """A server context with its certificate; with `client_ca_file`, clients must show a
    certificate signed by that CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, "tls", cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(cafile=_readable("tls-client-ca", client_ca_file))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _load_chain(context: ssl.SSLContext, key: str, cert: str | Path, private: str | Path) -> None:
    cert_path = _readable(f"{key}.cert-file", cert)
    key_path = _readable(f"{key}.key-file", private) if private else None
    try:
        context.load_cert_chain(cert_path, key_path)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"{key}.cert-file", f"not a certificate and key that belong together: {exc}"
        ) from None


def is_loopback(host: str) -> bool:
    """Whether a peer address is this machine's loopback (IPv4, IPv6 or IPv4-mapped)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def handshake_hint(exc: ssl.SSLError) -> str:
    """What a failed client handshake means, said so a user can act on it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or str(exc)
        if "expired" in why:
            return f"the server's certificate has expired ({why})"
        if "hostname" in why.lower() or "IP address mismatch" in why:
            return f"the server's certificate is not for this name ({why})"
        return f"the server's certificate is not trusted ({why}): is ca-file the CA that signed it?"
    reason = (exc.reason or "").upper()
    if reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
        return "the server does not speak TLS on this port (plain PostOffice? set tls = false)"
    if "CERTIFICATE" in reason or "ALERT" in reason:
        return (
            f"the server refused the handshake ({exc.reason}): "
            "does it require a client certificate?"
        )
    return f"TLS handshake failed: {exc.reason or exc}"

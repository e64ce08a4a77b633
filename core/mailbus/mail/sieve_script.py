"""The Sieve script of the routed mode (sans-IO): which folder each Mailbus email is
filed into, and the script that has the mail server do it on delivery.

The script sorts by the same headers the engine reads (mailbus.envelope): an email with
`Publisher-GID` is a message of the topic in its Subject, one with `Client-GID` a request
to the service in its Subject, or that service's response when it also has
`In-Reply-To`. Each routed name has its own folder per kind, so a participant reads
only what it subscribes to, serves or calls:

    <prefix>-t-<name>   messages of a topic
    <prefix>-s-<name>   requests to a service
    <prefix>-r-<name>   responses of a service (every client of it on the account)

Anything else (foreign mail, and Mailbus mail of a name the script does not route) is
left to Sieve's implicit keep: it stays in INBOX, where the routed receiver reads it
when one of its names is not routed.

Folder names are flat (no hierarchy separator, which differs between servers) and
injective: ASCII lower-case letters, digits and `-` stay, every other byte of the
UTF-8 name (upper case included: Mailbus names are case-sensitive, some servers' folder
names are not) is written `_xx`. Subjects are compared with `i;octet`, exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mailbus.errors import InvalidNameError
from mailbus.names import check_name

SCRIPT_NAME = "mailbus"
TOPIC, SERVICE, RESPONSE = "t", "s", "r"
KINDS = (TOPIC, SERVICE, RESPONSE)
DEFAULT_PREFIX = "mailbus"
# Maildir-based servers (Dovecot) store a folder as a directory: 255 bytes at most,
# with a leading dot; keep well under that.
MAX_FOLDER_LENGTH = 200
_PREFIX = re.compile(r"[a-z][a-z0-9-]{0,30}")
_KEEP = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-")


def check_prefix(prefix: str) -> str:
    if not _PREFIX.fullmatch(prefix):
        raise InvalidNameError(
            f"folder prefix {prefix!r} must be 1-31 lower-case ASCII letters, digits or '-', "
            "starting with a letter"
        )
    return prefix


def folder_name(prefix: str, kind: str, name: str) -> str:
    """The folder of `name` (a topic or service) for `kind`; InvalidNameError if `name`
    is not a valid Mailbus name or its folder name would be too long."""
    check_prefix(prefix)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    what = "topic" if kind == TOPIC else "service"
    check_name(name, what)
    encoded = "".join(chr(b) if b in _KEEP else f"_{b:02x}" for b in name.encode("utf-8"))
    folder = f"{prefix}-{kind}-{encoded}"
    if len(folder) > MAX_FOLDER_LENGTH:
        raise InvalidNameError(
            f"{what} name {name!r} cannot be routed: its folder name would be {len(folder)} "
            f"characters, over {MAX_FOLDER_LENGTH} (shorter names, or fewer characters "
            "outside a-z 0-9 -, which take three each)"
        )
    return folder


def sieve_string(text: str) -> str:
    """`text` as a Sieve quoted string (RFC 5228 2.4.2): `\\` and `"` escaped. Names
    never hold a line break (check_name refuses them), so no multi-line form."""
    if "\r" in text or "\n" in text or "\x00" in text:
        raise InvalidNameError(f"{text!r} cannot be a one-line Sieve string")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class Routes:
    """The names the server files into their own folders."""

    topics: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        check_prefix(self.prefix)
        object.__setattr__(self, "topics", _unique(self.topics, TOPIC, self.prefix))
        object.__setattr__(self, "services", _unique(self.services, SERVICE, self.prefix))

    def folder(self, kind: str, name: str) -> str | None:
        """The folder `name` of `kind` is filed into, or None if it stays in INBOX."""
        names = self.topics if kind == TOPIC else self.services
        return folder_name(self.prefix, kind, name) if name in names else None

    def folders(self) -> list[str]:
        return [
            *(folder_name(self.prefix, TOPIC, t) for t in self.topics),
            *(folder_name(self.prefix, k, s) for s in self.services for k in (SERVICE, RESPONSE)),
        ]


def _unique(names: Iterable[str], kind: str, prefix: str) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        folder_name(prefix, kind, name)  # refuses a name that cannot be a folder
        if name not in out:
            out.append(name)
    return tuple(out)


def _rules(names: Iterable[str], kind: str, prefix: str, indent: str) -> list[str]:
    return [
        f'{indent}if header :is :comparator "i;octet" "Subject" {sieve_string(name)} '
        f"{{ fileinto :create {sieve_string(folder_name(prefix, kind, name))}; stop; }}"
        for name in names
    ]


def sieve_script(routes: Routes) -> str:
    """The Sieve script that files Mailbus mail of `routes` into its folders (the same
    headers decide the kind as in mailbus.envelope.open_envelope)."""
    p = routes.prefix
    lines = [
        "# Written by Mailbus (routed mode): files Mailbus mail by Subject into one",
        "# folder per topic, service and service's responses; the rest stays in INBOX.",
        'require ["fileinto", "mailbox"];',
        'if exists "Publisher-GID" {',
        *_rules(routes.topics, TOPIC, p, "    "),
        '} elsif exists "Client-GID" {',
        '    if exists "In-Reply-To" {',
        *_rules(routes.services, RESPONSE, p, "        "),
        "    } else {",
        *_rules(routes.services, SERVICE, p, "        "),
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"

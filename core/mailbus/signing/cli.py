"""`mailbus keygen`: a new ed25519 key pair, printed as the options to paste.

The private key goes to a file readable by its owner only (0600 from the moment it is
created) and never to the terminal, unless `--private-key-to-stdout` asks for it (to
pipe it into a secret store). What is printed is the `[signing]` table for the sender
and the keyring entry every receiver needs (also the DNS TXT record, for real domains).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mailbus.errors import ConfigError


def _toml(value: str) -> str:
    # ASCII only (names are checked), so JSON's quoting is TOML's basic string.
    return json.dumps(value)


def _run(args: argparse.Namespace) -> int:
    from mailbus.signing.config import key_name, signing_config
    from mailbus.signing.keys import new_ed25519_key, write_private_key

    # The same checks as the options: a name keygen accepts is one the options accept.
    signing_config({"signing": {"domain": args.domain, "selector": args.selector}})
    private, record = new_ed25519_key()
    name = key_name(args.selector, args.domain)
    table = [
        "[signing]",
        f"domain = {_toml(args.domain.lower())}",
        f"selector = {_toml(args.selector.lower())}",
        'algorithm = "ed25519-sha256"',
    ]
    if args.private_key_to_stdout:
        table.append("private-key-env = " + _toml("MAILBUS_SIGNING_KEY") + "  # set it to the key")
        print(private.material.decode("ascii"))
        print()
    else:
        path = Path(args.out or f"{args.selector}.{args.domain}.key").expanduser().resolve()
        try:
            write_private_key(path, private, overwrite=args.force)
        except FileExistsError:
            raise ConfigError("--out", f"{path} exists; pass --force to replace it") from None
        except OSError as exc:
            raise ConfigError("--out", f"cannot write {path}: {exc.strerror}") from None
        print(f"# private key written to {path} (readable by its owner only)")
        table.append(f"private-key-file = {_toml(str(path))}")
    table += [
        "# require-signature = true     # on receivers, once every sender signs",
        "",
        "[signing.keyring]              # on every participant that checks signatures",
        f"{_toml(name)} = {_toml(record)}",
    ]
    print("\n".join(table))
    print(f"\n# for a real domain, the same as a DNS TXT record:\n# {name}. IN TXT {_toml(record)}")
    sys.stdout.flush()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "keygen", help="make an ed25519 key pair for signed mail; print the options to paste"
    )
    parser.add_argument("--domain", required=True, help="the signing domain (d=)")
    parser.add_argument("--selector", default="mailbus", help="the selector (s=)")
    parser.add_argument(
        "--out", metavar="FILE", help="private key file (default SELECTOR.DOMAIN.key)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing key file")
    parser.add_argument(
        "--private-key-to-stdout",
        action="store_true",
        help="print the private key instead of writing a file (for a secret store)",
    )
    parser.set_defaults(handler=_run)

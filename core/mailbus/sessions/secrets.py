"""The passwords a context may use, gathered so that a recording (or a notebook's copy
of the traffic) can redact every one of them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mailbus.registry import secret_environment

if TYPE_CHECKING:
    from mailbus.options import Options


def _section_secrets(value: object, found: set[str]) -> None:
    """Every non-empty string under a key that names a password, at any depth."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and "password" in key.lower() and isinstance(item, str):
                if item:
                    found.add(item)
            else:
                _section_secrets(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _section_secrets(item, found)


def context_secrets(options: Options, environ: Mapping[str, str] | None = None) -> set[str]:
    """The passwords a context with these options may use, to redact them all: the mail
    password, every `password` key of the option tables (`[postoffice] password`...)
    and every secret a transport declares it reads from the environment (the PostOffice
    password, which wins over the table's)."""
    env = os.environ if environ is None else environ
    found: set[str] = set()
    if options.password:
        found.add(options.password)
    _section_secrets(options.sections, found)
    found.update(env[name] for name in secret_environment() if env.get(name))
    return found

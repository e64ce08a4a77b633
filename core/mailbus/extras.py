"""Optional extras, imported where they are used: a module that needs one still
imports without it, and the first use says which extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str, needed_for: str) -> ModuleType:
    """`module`, or ModuleNotFoundError naming the `extra` that provides it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"{needed_for} needs {module!r} from the `{extra}` extra: "
            f"pip install 'mailbus[{extra}]' (the test command installs it)"
        ) from exc

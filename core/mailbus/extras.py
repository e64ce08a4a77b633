"""Optional extras, imported where they are used: a module that needs one still
imports without it, and the first use says which extra to install.

The engine's own dependencies are imapclient, pycurl, dkimpy and sievelib; every other
library comes with an extra of `pyproject.toml`, listed here by the top-level modules it
provides, so that a ModuleNotFoundError anywhere can be turned into the line that fixes
it (`pip install 'mailbus[sessions]'`)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

EXTRA_OF: dict[str, str] = {
    "polars": "sessions",
    "narwhals": "sessions",
    "pyarrow": "sessions",
    "mcap": "sessions",
    "zstandard": "sessions",  # mcap's, for its errors
    "textual": "workbench",
    "textual_serve": "workbench",
    "textual_plotext": "workbench",
    "rich": "workbench",
    "pyspark": "spark",
    "pandas": "spark",
    "anywidget": "notebook",
    "traitlets": "notebook",
    "altair": "notebook",
    "vl_convert": "notebook",
    "pytest": "test",
    "trustme": "test",
    "websockets": "foxglove",
}


class MissingExtra(ModuleNotFoundError):
    """A library of an extra is not installed; the message names the extra."""

    def __init__(self, module: str, extra: str, needed_for: str) -> None:
        super().__init__(
            f"{needed_for} needs {module!r} from the `{extra}` extra: "
            f"pip install 'mailbus[{extra}]' (the test command installs it)",
            name=module,
        )
        self.extra = extra


def missing_extra(
    exc: ModuleNotFoundError, needed_for: str, extra: str | None = None
) -> MissingExtra | None:
    """`exc` told as the extra to install (`extra`, or the one that provides the missing
    module), or None when no extra provides that module (a bug or a broken install, to
    be reported as it is)."""
    if isinstance(exc, MissingExtra):
        return exc
    top = (exc.name or "").partition(".")[0]
    if top not in EXTRA_OF:
        return None
    return MissingExtra(top, extra or EXTRA_OF[top], needed_for)


@contextmanager
def needs_extra(needed_for: str, extra: str | None = None) -> Iterator[None]:
    """Imports inside the block that fail for lack of an extra raise MissingExtra naming
    `extra` (by default the one that provides the missing module):
    `with needs_extra("mailbus.sessions"): import polars as pl`."""
    try:
        yield
    except ModuleNotFoundError as exc:
        told = missing_extra(exc, needed_for, extra)
        if told is None or told is exc:
            raise
        raise told from exc


def require(module: str, extra: str, needed_for: str) -> ModuleType:
    """`module`, or MissingExtra naming the `extra` that provides it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtra(module, extra, needed_for) from exc

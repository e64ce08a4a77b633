"""A PostOffice box of its own for each browser viewer of `mailbus serve`.

textual-serve starts one workbench process per browser tab. A PostOffice box can be
checked out by one connection only, so every viewer on the configured box but the first
was refused. Each viewer instead takes the configured box name plus a random suffix
(`lab.workbench` → `lab.workbenchv3fa91c2e`): the same parent, so the daemon delivers the
group's traffic to it as to the configured box, and nothing is shared between viewers.
The viewer removes its box (and the `.out` box it sends from) when it closes, so tabs
leave no boxes filling behind them."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Mapping
from typing import Any

from mailbus.errors import ConfigError
from mailbus.options import Options
from mailbus.postoffice.client import PostOfficeError
from mailbus.postoffice.transport import SEND_SUFFIX, PostOfficeOptions

# Box names are dotted runs of letters and digits: the suffix is a letter and hex digits.
VIEWER_MARK = "v"


def new_viewer_token() -> str:
    return secrets.token_hex(4)


def viewer_options(options: Options, token: str | None = None) -> Options:
    """`options` with a PostOffice box of this viewer's own; other transports unchanged
    (an IMAP or in-process observer does not hold anything exclusively)."""
    if options.transport != "postoffice":
        return options
    table: Mapping[str, Any] = options.sections.get("postoffice", {})
    box = table.get("box")
    if not isinstance(box, str) or not box:
        return options  # the transport reports the missing box with its own message
    own = dict(table)
    own["box"] = f"{box}{VIEWER_MARK}{token or new_viewer_token()}"
    # The viewer's box is new by construction: it must be created even where the
    # configured box is expected to exist already.
    own["create"] = True
    return dataclasses.replace(options, sections={**options.sections, "postoffice": own})


def viewer_box(options: Options) -> str | None:
    """The PostOffice box `options` check out, or None on another transport."""
    if options.transport != "postoffice":
        return None
    box = options.sections.get("postoffice", {}).get("box")
    return box if isinstance(box, str) else None


def remove_viewer_boxes(options: Options) -> list[str]:
    """Remove the viewer's boxes (after its context has returned them); the names removed.

    Best effort: a daemon that is down or a box already gone leaves nothing to do here
    (the daemon's idle expiry removes what a crashed viewer left)."""
    if options.transport != "postoffice":
        return []
    try:
        opts = PostOfficeOptions.from_options(options)
    except ConfigError:  # the context refused them already: it made no box
        return []
    removed: list[str] = []
    for name in (opts.box, opts.box + SEND_SUFFIX):
        with (
            contextlib.suppress(PostOfficeError, OSError),
            opts.client() as client,
        ):
            client.check_out(name, opts.password)
            client.remove()
            removed.append(name)
    return removed

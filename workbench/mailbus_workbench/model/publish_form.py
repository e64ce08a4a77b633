"""Checks of the Publish form before anything is sent: extra headers typed as
`Name: value` lines (the engine's own rules) and a body that looks like JSON but is not."""

from __future__ import annotations

import json

from mailbus import headers as H
from mailbus.errors import InvalidNameError
from mailbus.names import check_header_name, check_header_value

JSON_STARTS = ("{", "[", '"')


def parse_headers(text: str) -> dict[str, str]:
    """`Name: value` lines (blank lines skipped) as headers for `publish`; InvalidNameError
    naming the line for anything the engine would refuse."""
    headers: dict[str, str] = {}
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        where = f"header line {number}"
        if not colon:
            raise InvalidNameError(f"{where}: expected 'Name: value', got {line!r}")
        name, value = name.strip(), value.strip(" \t")
        try:
            check_header_name(name)
            check_header_value(name, value)
        except InvalidNameError as exc:
            raise InvalidNameError(f"{where}: {exc}") from None
        lower = name.lower()
        if lower in H.RESERVED or lower in H.METADATA:
            raise InvalidNameError(f"{where}: header {name!r} is set by Mailbus")
        if lower in seen:
            raise InvalidNameError(f"{where}: header {name!r} is given twice")
        seen.add(lower)
        headers[name] = value
    return headers


def json_problem(body: str) -> str | None:
    """Why a body that starts like JSON (`{`, `[` or `"`) is not JSON; None when it is
    JSON or plain text (bodies need not be JSON)."""
    if not body.lstrip().startswith(JSON_STARTS):
        return None
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        return f"line {exc.lineno} column {exc.colno}: {exc.msg}"
    except RecursionError:
        return "nested too deeply"
    return None

"""Mailbus bodies as Foxglove JSON messages, and the JSON Schema of a topic inferred from
the bodies seen.

Foxglove's `json` encoding carries one JSON object per message. A body that is a JSON
object travels unchanged (its bytes, not re-serialised); any other body (plain text, a
number, a list, a string that is not JSON) travels as the documented wrapper
`{"text": "<the body as it was>"}`, so that nothing is dropped and the app can still
show it. (Mailbus bodies are text, so no base64 wrapper is needed.)

The schema (mailbus.json_shape, shared with the MCAP export) is widened as new fields or
new types appear: `Shape.widen(value)` says whether it changed, and the bridge then
advertises the topic again with the wider schema.
"""

from __future__ import annotations

import json
from typing import Any

from mailbus.json_shape import MAX_DEPTH, MAX_PROPERTIES, Shape, object_schema

__all__ = ["MAX_DEPTH", "MAX_PROPERTIES", "TEXT_FIELD", "Shape", "TopicSchema", "as_message"]

TEXT_FIELD = "text"


class TopicSchema:
    """The schema of one topic's messages as Foxglove sees them."""

    def __init__(self) -> None:
        self.shape = Shape()
        self.shape.types.add("object")  # every Foxglove JSON message is an object

    def widen(self, message: dict[str, Any]) -> bool:
        return self.shape.widen(message)

    def text(self, title: str) -> str:
        schema = object_schema(self.shape, title)
        return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def as_message(body: str) -> tuple[bytes, dict[str, Any]]:
    """`body` as the payload of a Foxglove JSON message, with the object it decodes to.
    A JSON object is sent as it came; anything else inside the `{"text": ...}` wrapper."""
    stripped = body.lstrip()
    if stripped.startswith("{"):
        try:
            value = _DECODER.decode(body)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return body.encode("utf-8", "replace"), value
    wrapped = {TEXT_FIELD: body}
    return json.dumps(wrapped, ensure_ascii=False).encode("utf-8", "replace"), wrapped


def _not_json(constant: str) -> Any:
    # Python reads NaN and Infinity; JSON (and so the app) does not: wrap such a body.
    raise ValueError(f"{constant} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_not_json)  # one, not one per body

"""Mailbus bodies as Foxglove JSON messages, and the JSON Schema of a topic inferred from
the bodies seen.

Foxglove's `json` encoding carries one JSON object per message. A body that is a JSON
object travels unchanged (its bytes, not re-serialised); any other body (plain text, a
number, a list, a string that is not JSON) travels as the documented wrapper
`{"text": "<the body as it was>"}`, so that nothing is dropped and the app can still
show it. (Mailbus bodies are text, so no base64 wrapper is needed.)

The schema is widened as new fields or new types appear: `Shape.widen(value)` says
whether it changed, and the bridge then advertises the topic again with the wider
schema. No field is `required`, and nested levels past MAX_DEPTH or objects past
MAX_PROPERTIES are left open (`{}`), so a schema stays small whatever the bodies.
"""

from __future__ import annotations

import json
from typing import Any

TEXT_FIELD = "text"
MAX_DEPTH = 8
MAX_PROPERTIES = 256


# JSON decodes to exactly these types (no subclasses): a lookup, not isinstance chains.
_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",  # an int then a float must not change the schema
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_CONTAINERS = frozenset({"object", "array"})


class Shape:
    """What the values seen at one place of the bodies looked like."""

    __slots__ = ("depth", "items", "open", "properties", "types")

    def __init__(self, depth: int = 0) -> None:
        self.depth = depth
        self.types: set[str] = set()
        self.properties: dict[str, Shape] = {}
        self.items: Shape | None = None
        self.open = depth >= MAX_DEPTH  # past the depth limit: anything goes

    def widen(self, value: Any) -> bool:
        """Take `value` (decoded JSON) in; True when the schema grew."""
        if self.open:
            return False
        changed = False
        kind = _TYPES[type(value)]
        if kind not in self.types:
            self.types.add(kind)
            changed = True
        if kind == "object":
            properties = self.properties
            for key, item in value.items():
                shape = properties.get(key)
                if shape is None:
                    if len(properties) >= MAX_PROPERTIES:
                        self.open = True
                        return True
                    shape = properties[key] = Shape(self.depth + 1)
                    changed = True
                else:
                    item_kind = _TYPES[type(item)]
                    # The hot path: a scalar of a type seen here before changes nothing.
                    if item_kind not in _CONTAINERS and (item_kind in shape.types or shape.open):
                        continue
                changed = shape.widen(item) or changed
        elif kind == "array":
            if self.items is None:
                self.items = Shape(self.depth + 1)
            for item in value:
                changed = self.items.widen(item) or changed
        return changed

    def to_json(self) -> dict[str, Any]:
        if self.open or not self.types:
            return {}
        types = sorted(self.types)
        out: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        if self.properties:
            out["properties"] = {k: v.to_json() for k, v in self.properties.items()}
        if self.items is not None and self.items.types:
            out["items"] = self.items.to_json()
        return out


class TopicSchema:
    """The schema of one topic's messages as Foxglove sees them."""

    def __init__(self) -> None:
        self.shape = Shape()
        self.shape.types.add("object")  # every Foxglove JSON message is an object

    def widen(self, message: dict[str, Any]) -> bool:
        return self.shape.widen(message)

    def text(self, title: str) -> str:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title}
        schema.update(self.shape.to_json())
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

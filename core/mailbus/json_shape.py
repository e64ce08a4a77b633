"""A JSON Schema inferred from the JSON values seen at a place (a topic's bodies),
widened as values of new shapes come: what the live Foxglove bridge advertises for a
topic and what `mailbus export --format mcap` writes for a channel, so a layout made on
one works on the other. Pure: no I/O.

The schema describes what was seen and every value seen validates against it: no field
is `required`, an integer is a `number` (an int then a float must not change it), and
nested levels past MAX_DEPTH or objects past MAX_PROPERTIES are left open (`{}`), so a
schema stays small whatever the bodies.
"""

from __future__ import annotations

from typing import Any

JSONSCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"
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


def object_schema(shape: Shape, title: str) -> dict[str, Any]:
    """The schema document of `shape`, whose values are all JSON objects."""
    schema: dict[str, Any] = {"$schema": JSONSCHEMA_DRAFT, "title": title}
    schema.update(shape.to_json() or {"type": "object"})
    return schema

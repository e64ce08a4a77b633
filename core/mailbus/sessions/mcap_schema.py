"""A JSON Schema inferred from JSON values, widened as values of new shapes are added.

`mailbus export --format mcap` gives each topic's and service's channel the schema of
every body it carries, so that Foxglove and Lichtblick list the fields to plot. Pure: no
I/O. The schema never forbids a field (no `required`, no `additionalProperties: false`):
it describes what was seen, and every value that was added validates against it.
"""

from __future__ import annotations

from typing import Any

# Deeper values, and objects with more keys, are described as "anything": a schema the
# size of the data would help no viewer.
MAX_DEPTH = 12
MAX_PROPERTIES = 500

JSONSCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"


class Shape:
    """The union of the JSON values seen at one place of a document."""

    __slots__ = ("any", "items", "properties", "types")

    def __init__(self) -> None:
        self.types: set[str] = set()
        self.properties: dict[str, Shape] | None = None
        self.items: Shape | None = None
        self.any = False  # too deep or too wide: every value goes

    def add(self, value: object, depth: int = 0) -> None:
        if self.any:
            return
        if depth >= MAX_DEPTH:
            self.any = True
            return
        if isinstance(value, dict):
            self.types.add("object")
            if self.properties is None:
                self.properties = {}
            properties = self.properties
            for key, item in value.items():
                shape = properties.get(key)
                if shape is None:
                    if len(properties) >= MAX_PROPERTIES:
                        self.any = True
                        return
                    shape = properties[key] = Shape()
                shape.add(item, depth + 1)
        elif isinstance(value, list):
            self.types.add("array")
            if self.items is None:
                self.items = Shape()
            for item in value:
                self.items.add(item, depth + 1)
        elif isinstance(value, bool):  # before int: a bool is an int in Python
            self.types.add("boolean")
        elif isinstance(value, int):
            self.types.add("integer")
        elif isinstance(value, float):
            self.types.add("number")
        elif isinstance(value, str):
            self.types.add("string")
        elif value is None:
            self.types.add("null")
        else:
            self.any = True

    def schema(self) -> dict[str, Any]:
        if self.any or not self.types:
            return {}
        types = set(self.types)
        if "number" in types:
            types.discard("integer")  # an integer is a number
        result: dict[str, Any] = {}
        result["type"] = next(iter(types)) if len(types) == 1 else sorted(types)
        if self.properties is not None:
            result["properties"] = {k: v.schema() for k, v in self.properties.items()}
        if self.items is not None and (self.items.types or self.items.any):
            result["items"] = self.items.schema()
        return result


def object_schema(shape: Shape, title: str) -> dict[str, Any]:
    """The channel schema of `shape`, whose values are all JSON objects."""
    schema = {"$schema": JSONSCHEMA_DRAFT, "title": title}
    schema.update(shape.schema() or {"type": "object"})
    return schema

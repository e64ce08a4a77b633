"""Checks on what the reference client saw, shared by the Foxglove tests."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator


def bodies(seen: dict[str, Any], topic: str) -> list[Any]:
    """The messages of `topic` the client received, decoded, after checking that the
    channel is JSON with a JSON Schema that every one of them satisfies and that their
    log times never go back."""
    channel = seen["channels"][topic]
    assert (channel["encoding"], channel["schemaEncoding"]) == ("json", "jsonschema"), channel
    validator = Draft202012Validator(json.loads(channel["schema"]))
    messages = seen["messages"][topic]
    decoded = [json.loads(m["data"]) for m in messages]
    for body in decoded:
        errors = [e.message for e in validator.iter_errors(body)]
        assert not errors, f"{topic}: {body!r} does not satisfy {channel['schema']}: {errors}"
    times = [int(m["t"]) for m in messages]
    assert times == sorted(times), f"{topic}: log times go back"
    return decoded


def numbers_after(prefix: str, texts: list[str]) -> list[int]:
    return [int(t.removeprefix(prefix)) for t in texts]


def consecutive(values: list[int]) -> bool:
    return values == list(range(values[0], values[0] + len(values)))

"""The links between a broker's modules and the routes they give each source.

A link is (source or "*", sink) with its own Backpressure, or None for the sink's. "*"
means every other module, including ones added later; a sink takes either "*" or
explicit links, never both (a message would come twice). Not thread-safe: the broker
calls it under its control lock."""

from __future__ import annotations

from collections.abc import Mapping

from mailbus.broker.errors import LinkError
from mailbus.broker.policy import Backpressure
from mailbus.broker.record import ModuleRecord
from mailbus.broker.snapshot import LinkInfo

WILDCARD = "*"
Link = tuple[str, str]  # (source name or WILDCARD, sink name)


class LinkTable:
    def __init__(self) -> None:
        self._links: dict[Link, Backpressure | None] = {}

    def __len__(self) -> int:
        return len(self._links)

    def add(self, source: str, sink: str, backpressure: Backpressure | None) -> None:
        """Add the link `source` -> `sink`; LinkError if it loops or duplicates one."""
        if sink == WILDCARD:
            raise LinkError("'*' can only be a link's source")
        if source == sink:
            raise LinkError(f"module {sink!r} cannot be linked to itself")
        if (source, sink) in self._links:
            raise LinkError(f"duplicate link {source!r} -> {sink!r}")
        if source != WILDCARD and (WILDCARD, sink) in self._links:
            raise LinkError(
                f"duplicate link {source!r} -> {sink!r}: {sink!r} already "
                f"receives from every module through '*'"
            )
        if source == WILDCARD:
            explicit = sorted(s for s, k in self._links if k == sink)
            if explicit:
                raise LinkError(
                    f"duplicate link '*' -> {sink!r}: it already receives from "
                    f"{', '.join(explicit)}; remove those links first"
                )
        self._links[(source, sink)] = backpressure

    def remove(self, source: str, sink: str) -> None:
        if sink == WILDCARD:
            raise LinkError("'*' can only be a link's source")
        if (source, sink) not in self._links:
            raise LinkError(f"no link {source!r} -> {sink!r}")
        del self._links[(source, sink)]

    def remove_module(self, name: str) -> list[Link]:
        """Remove every link to or from the module `name`; the links removed."""
        gone = [key for key in self._links if name in key]
        for key in gone:
            del self._links[key]
        return gone

    def route(self, records: Mapping[str, ModuleRecord]) -> None:
        """Recompute every source's route tuple (its sinks with their back-pressure)."""
        for record in records.values():
            routes = []
            for (source, sink), backpressure in self._links.items():
                if source == record.name or (source == WILDCARD and sink != record.name):
                    target = records[sink]
                    routes.append((target, backpressure or target.backpressure))
            record.routes = tuple(routes)

    def infos(self) -> list[LinkInfo]:
        return [
            LinkInfo(source, sink, backpressure.describe() if backpressure else "")
            for (source, sink), backpressure in self._links.items()
        ]

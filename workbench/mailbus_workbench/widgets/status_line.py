"""The bottom status line's text: what the model holds and how fast events come."""

from __future__ import annotations

from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.widgets import format as fmt


def status_text(model: WorkbenchModel, events_per_s: float, engine_error: str) -> str:
    parts = [
        f"{model.topics.total} msgs",
        f"{len(model.topics.stats)} topics",
        f"{len(model.services)} calls",
        f"{fmt.rate(events_per_s)} events",
    ]
    if model.paused:
        parts.append("PAUSED")
    if model.feed.dropped:
        parts.append(f"feed dropped {model.feed.dropped}")
    if model.topics.untracked:
        parts.append(f"{model.topics.untracked} msgs on untracked topics")
    if engine_error:
        parts.append(f"engine: {engine_error}")
    return "  ·  ".join(parts)

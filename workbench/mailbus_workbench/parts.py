"""What the views are handed (posting's pattern): the model, the engine, the settings and
the options the app was started with. No view looks the app up, so views import no app."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mailbus.broker import Broker

from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.model.state import WorkbenchModel


@dataclass
class WorkbenchParts:  # not frozen: a settings change reaches every view
    model: WorkbenchModel
    settings: Settings
    engine: EngineHost | None = None  # None: recorded or fixed data, nothing to send with
    raw_date: str | None = None  # a fixed Date for rebuilt raw sources (snapshots)
    outbox_dir: Path | None = None
    given_brokers: dict[str, Broker] = field(default_factory=dict)
    tests_folder: Path | None = None  # the Tests view's folder as edited; None: the settings'

    @property
    def brokers(self) -> dict[str, Broker]:
        """The brokers the Broker view shows: the engine's, else those given."""
        return self.engine.brokers if self.engine is not None else self.given_brokers

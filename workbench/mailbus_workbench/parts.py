"""What the views are handed (posting's pattern): the model, the engine, the settings and
the options the app was started with. No view looks the app up, so views import no app."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mailbus.broker import Broker

from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.session_control import EarlyOpen
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
    early_open: EarlyOpen | None = None  # `mailbus open PATH`: opening since the app started

    def take_early_open(self, path: str) -> EarlyOpen | None:
        """The open of `path` started with the app, once (a later open reads afresh)."""
        early, self.early_open = self.early_open, None
        return early if early is not None and early.path == path else None

    @property
    def brokers(self) -> dict[str, Broker]:
        """The brokers the Broker view shows: the engine's, else those given."""
        return self.engine.brokers if self.engine is not None else self.given_brokers

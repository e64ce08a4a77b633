"""Mailbus in Jupyter: a live `Monitor` widget and the frames behind it (needs the
`notebook` extra: anywidget, altair, vl-convert-python, imported on first use)."""

from mailbus.notebook.foxglove import foxglove
from mailbus.notebook.model import MonitorModel
from mailbus.notebook.monitor import Monitor
from mailbus.notebook.results import CallResult, Published
from mailbus.notebook.served import ServedWorkbench, workbench

__all__ = [
    "CallResult",
    "Monitor",
    "MonitorModel",
    "Published",
    "ServedWorkbench",
    "foxglove",
    "workbench",
]

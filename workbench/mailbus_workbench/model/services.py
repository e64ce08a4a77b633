"""The Services view's store: the engine's request/response pairing
(`mailbus.service_traces`) plus the latencies of answered calls, per service."""

from __future__ import annotations

from mailbus.service_traces import (
    DEFAULT_MAX_TRACES,
    DEFAULT_TIMEOUT_S,
    DISCARDED,
    MAX_EARLY_DISCARDS,
    ServiceTraces,
    Trace,
    TraceStatus,
)

from mailbus_workbench.model.latency import LatencyBook

__all__ = [
    "DEFAULT_MAX_TRACES",
    "DEFAULT_TIMEOUT_S",
    "DISCARDED",
    "MAX_EARLY_DISCARDS",
    "ServiceStore",
    "Trace",
    "TraceStatus",
]


class ServiceStore(ServiceTraces):
    """The last `max_traces` traces, oldest first, and `latencies` of the answered."""

    def __init__(
        self, max_traces: int = DEFAULT_MAX_TRACES, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        super().__init__(max_traces, timeout_s)
        self.latencies = LatencyBook()  # of answered calls, per service, bounded

    def _answered(self, trace: Trace) -> None:
        latency = trace.latency_s
        if latency is not None:
            self.latencies.add(trace.service, latency)

    def clear(self) -> None:
        super().clear()
        self.latencies.clear()

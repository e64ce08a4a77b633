"""bench/broker.py reports what it measures, losses included: the JSON line always comes
out, with `lost`, and a lossy run exits non-zero (it used to exit before printing)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from mailbus.broker import Broker, BrokerMessage

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {
    "one_to_one_msgs_per_s",
    "one_to_eight_msgs_per_s",
    "avg_latency_us",
    "p99_latency_us",
    "lost",
}


@pytest.fixture
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_broker_under_test", ROOT / "bench/broker.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _last_json(out: str) -> dict[str, float]:
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def test_smoke_run_prints_the_figures_and_exits_0(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--smoke"]) == 0
    figures = _last_json(capsys.readouterr().out)
    assert set(figures) >= REQUIRED
    assert figures["lost"] == 0


class LossyBroker(Broker):
    """Silently loses every 7th publish: what the benchmark must report, not hide."""

    calls = 0

    def publish(self, source: object, message: BrokerMessage) -> int:
        LossyBroker.calls += 1
        if LossyBroker.calls % 7 == 0:
            return 1
        return super().publish(source, message)


def test_a_lossy_run_still_prints_the_json_with_lost_then_exits_1(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(LossyBroker, "calls", 0)
    monkeypatch.setattr(bench, "Broker", LossyBroker)
    monkeypatch.setattr(bench, "SINK_WAIT_S", 0.2)  # the losses never arrive: wait less
    assert bench.main(["--smoke"]) == 1
    captured = capsys.readouterr()
    figures = _last_json(captured.out)
    assert set(figures) >= REQUIRED
    assert figures["lost"] > 0
    assert "LOST" in captured.err and "not valid" in captured.err

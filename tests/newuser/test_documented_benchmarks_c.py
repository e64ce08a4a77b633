"""The documented benchmarks' share 3 of 3 (benchmark_smoke.py)."""

from __future__ import annotations

import pytest
from benchmark_smoke import cases, run_documented


@pytest.mark.parametrize(("module", "args"), cases(2))
def test_the_documented_benchmark_runs(module: str, args: list[str]) -> None:
    run_documented(module, args)

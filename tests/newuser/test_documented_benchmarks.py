"""The benchmarks the documentation gives run as a reader would run them (first share;
benchmark_smoke.py says what and why)."""

from __future__ import annotations

import pytest
from benchmark_smoke import SHARES, SMOKE, cases, documented, run_documented


def test_every_documented_benchmark_has_a_smoke_run() -> None:
    assert documented() == set(SMOKE), "add the new benchmark to SMOKE (or fix the docs)"
    assert set().union(*SHARES) == set(SMOKE), "give the new benchmark a share in SHARES"


@pytest.mark.parametrize(("module", "args"), cases(0))
def test_the_documented_benchmark_runs(module: str, args: list[str]) -> None:
    run_documented(module, args)

"""Fixtures of the session tests: a tiny hand-made session, the sample sessions, and one
SparkSession for the whole run (started only when a `spark` test needs it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sessions_helpers import SAMPLE_NAMES, SAMPLES, tiny_events, write_session


@pytest.fixture(scope="session")
def tiny_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_session(tmp_path_factory.mktemp("tiny") / "tiny", tiny_events())


@pytest.fixture(scope="session")
def sample_sessions() -> list[Path]:
    paths = [SAMPLES / name for name in SAMPLE_NAMES]
    missing = [p for p in paths if not (p / "manifest.json").exists()]
    assert not missing, f"sample sessions missing: {missing}; run sample_sessions/regenerate.py"
    return paths


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.fail("Java is not installed (scripts/install-system-packages installs it)")
    from mailbus.sessions.analysis import spark_session

    session = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g")
    yield session
    session.stop()

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from outbox_support import SmtpSink


@pytest.fixture
def outbox_dir(tmp_path: Path) -> Path:
    return tmp_path / "outbox"


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[SmtpSink]:
    server = SmtpSink(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()

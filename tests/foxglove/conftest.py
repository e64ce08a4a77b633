"""The Foxglove tests' fixture: the independent client, installed (foxglove_peer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from foxglove_peer import install_peer


@pytest.fixture(scope="session")
def peer() -> Path:
    return install_peer()

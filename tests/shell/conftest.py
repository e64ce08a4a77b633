"""One PostOffice daemon per test module for the shell tests that can share it (each
test uses boxes of its own names)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shell.shell_system import System


@pytest.fixture(scope="module")
def shared_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    made = System(tmp_path_factory.mktemp("postoffice"))
    yield made
    made.daemon.stop()

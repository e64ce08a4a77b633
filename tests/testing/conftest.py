"""The kit's own tests run inner test files with pytester: what a user's run prints is
what is asserted on."""

from __future__ import annotations

from typing import Any

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def mailbus_mail_stack(mail_stack: Any) -> Any:
    """The suite's one mail stack (tests/conftest.py) serves the kit's mail bus too."""
    return mail_stack

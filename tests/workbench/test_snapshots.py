"""Snapshots of every screen on fixed data with a frozen clock (no live demo).

Update after an intended change with `pytest tests/workbench/test_snapshots.py
--snapshot-update`, look at the SVGs, and regenerate `screenshots/` with
`python -m mailbus_workbench.screenshots`."""

from __future__ import annotations

import pytest
from mailbus_workbench.fixtures import fixed_app
from mailbus_workbench.screenshots import SCENES, SIZE

# topics-raw and topics-filter are in screenshots/ only: the Raw tab and the filter are
# covered by Pilot tests, and each snapshot costs seconds of the test budget.
SNAPSHOTS = sorted(set(SCENES) - {"topics-raw", "topics-filter"})


@pytest.mark.parametrize("scene", SNAPSHOTS)
def test_screen(scene: str, snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(fixed_app(), run_before=SCENES[scene], terminal_size=SIZE)

"""mailbus.testing: a pytest kit for systems built on Mailbus (docs/testing-your-system.md).

Installed with `pip install mailbus[test]`; pytest finds the plugin through its
`pytest11` entry point (mailbus.testing.plugin). Fixtures: `bus`, `expect`, `system`,
`mock_service`, `faults`, `golden`.
"""

from mailbus.testing.buses import Bus, BusError
from mailbus.testing.expect import Expect, Expectation, ExpectationFailed
from mailbus.testing.faults import FaultPlan
from mailbus.testing.matching import Observed
from mailbus.testing.mocks import MockService
from mailbus.testing.system import Participant, System

__all__ = [
    "Bus",
    "BusError",
    "Expect",
    "Expectation",
    "ExpectationFailed",
    "FaultPlan",
    "MockService",
    "Observed",
    "Participant",
    "System",
]

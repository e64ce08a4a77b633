"""Shared by every test directory: puts tests/ on sys.path so that any test imports the
one bounded-wait helper, `from waiting import eventually` (and the Pilot twin `until`)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

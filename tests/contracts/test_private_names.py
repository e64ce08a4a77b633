"""No private name of imaplib, imapclient or Textual outside its adapter module
(tests/contracts/private_names.py says how they are found)."""

from __future__ import annotations

from pathlib import Path

import pytest
from private_names import Finding, scan

ROOT = Path(__file__).resolve().parents[2]
WIRE = "core/mailbus/mail/imap_wire.py"
TEXTUAL = "workbench/mailbus_workbench/textual_internals.py"
ADAPTERS = {"imaplib": {WIRE}, "imapclient": {WIRE}, "textual": {TEXTUAL}}
SCANNED = ("core", "workbench", "bench", "tests")

# Each test parses every source of the tree: seconds, not for the quick tier.
pytestmark = pytest.mark.slow


def sources() -> list[Path]:
    return [
        path
        for top in SCANNED
        for path in (ROOT / top).rglob("*.py")
        if ".venv" not in path.parts and "__snapshots__" not in path.parts
    ]


def test_the_adapters_exist_and_use_what_they_are_for() -> None:
    # Else an adapter renamed would leave the allowlist naming nothing.
    found = scan([ROOT / WIRE, ROOT / TEXTUAL], ROOT, {})
    assert {f.path for f in found} == {WIRE, TEXTUAL}


def test_no_private_name_of_a_library_is_used_outside_its_adapter() -> None:
    found = scan(sources(), ROOT, ADAPTERS)
    assert found == [], "\n".join(f"{f.path}:{f.line}: {f.lib} {f.what}" for f in found)


PLANTED = """
import imapclient
from imapclient import IMAPClient
from textual._context import active_app
from textual.screen import Screen


class Sneaky(Screen[object]):
    async def _on_idle(self, event):
        self._on_timer_update()
        await super()._on_idle(event)
        self.mine = self.app._batch_count


class Deeper(Sneaky):
    def refresh_soon(self):
        return self._dirty_widgets


def poll(client: imapclient.IMAPClient, other):
    imap = client._imap
    imap.untagged_responses.clear()
    other._command("NOOP")  # untyped: `_command` is also the PostOffice clerk's own
    return client._command_and_check("noop")


def typed(client: IMAPClient | None):
    with IMAPClient("host") as fresh:
        fresh._idle_tag = 1
    return client._raw_command_untagged(b"X", [])


class Ours:
    def __init__(self):
        self._imap_state = 0
        self._command = None

    def _refresh(self):
        return self._imap_state, self._command
"""


def test_each_kind_of_use_is_found_and_our_own_private_names_are_not(tmp_path: Path) -> None:
    planted = ROOT / "tests" / "contracts" / "_planted_violation.py"
    planted.write_text(PLANTED)
    try:
        found = scan([*sources()], ROOT, ADAPTERS)
    finally:
        planted.unlink()
    rel = "tests/contracts/_planted_violation.py"
    expected = {
        (4, "textual", "from textual._context import active_app"),
        (9, "textual", "def _on_idle"),
        (10, "textual", "self._on_timer_update"),
        (11, "textual", "self._on_idle"),
        (12, "textual", "._batch_count"),
        (17, "textual", "self._dirty_widgets"),
        (21, "imapclient", "client._imap"),
        (22, "imaplib", ".untagged_responses"),
        (24, "imapclient", "client._command_and_check"),
        (29, "imapclient", "fresh._idle_tag"),
        (30, "imapclient", "client._raw_command_untagged"),
    }
    assert {(f.line, f.lib, f.what) for f in found if f.path == rel} == expected
    assert all(isinstance(f, Finding) for f in found)

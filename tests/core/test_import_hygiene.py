"""The engine must work without the TUI: importing any of its modules loads neither
textual, rich nor the workbench package. tests/contracts checks the same statically."""

import subprocess
import sys

import pytest

IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
import mailbus
for info in pkgutil.walk_packages(mailbus.__path__, "mailbus."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
print(len([m for m in sys.modules if m.startswith("mailbus.")]))
TUI = ("textual", "textual_serve", "rich", "mailbus_workbench")
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in TUI)))
"""


@pytest.mark.slow
def test_every_core_module_imports_without_the_tui() -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded, tui = out.stdout.splitlines()
    assert int(loaded) > 60  # every subpackage was really imported, not only the top
    assert tui == ""

"""The engine must work without the TUI: importing it loads neither textual nor the
workbench package."""

import subprocess
import sys


def test_core_imports_without_textual() -> None:
    code = (
        "import sys, mailbus, mailbus.cli, mailbus.demo\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'mailbus_workbench', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_core_sources_never_import_the_workbench() -> None:
    from pathlib import Path

    import mailbus

    root = Path(mailbus.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "mailbus_workbench" in path.read_text() or "import textual" in path.read_text()
    ]
    assert offenders == []

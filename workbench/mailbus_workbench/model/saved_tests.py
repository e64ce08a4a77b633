"""Save what the workbench shows as a test (a message, a call, a recording): the source
from mailbus.testing.codegen, a file name derived from what was saved, and, on the
embedded demo, the demo's participants for the test to start, so that the saved file
passes as saved (the demo inside the workbench is out of a test's reach).
"""

from __future__ import annotations

from pathlib import Path

from mailbus import demo
from mailbus.testing.codegen import Start, function_name


class SaveError(ValueError):
    """The test cannot be written there; the message says why (nothing is written)."""


def demo_start(*, topic: str | None = None, service: str | None = None) -> Start:
    """The demo as the participant a test starts, ready once it offers the topic or the
    service the test names; nothing when the demo does not offer it."""
    if topic is not None and topic in demo.TOPICS:
        ready = [f"publisher:{topic}"]
    elif service is not None and service == demo.SERVICE:
        ready = [f"server:{service}"]
    else:
        return ()
    # A module, not the file's path: the saved test keeps working wherever mailbus is
    # installed (in-process, system.start runs the module's run() on a thread).
    return [(f"python -m {demo.__name__}", ready)]


def suggest_path(folder: Path, *names: str) -> Path:
    """`folder/test_<names>.py`, numbered past the files already there."""
    stem = function_name(*names)
    path = folder / f"{stem}.py"
    n = 2
    while path.exists():
        path = folder / f"{stem}_{n}.py"
        n += 1
    return path


def write_new(path: Path, source: str) -> None:
    """Write the test; an existing file is never replaced."""
    if path.suffix != ".py" or not path.name.startswith("test_"):
        raise SaveError(f"{path.name}: pytest collects files named test_*.py")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as out:
            out.write(source)
    except FileExistsError:
        raise SaveError(f"{path} exists: not overwritten. Choose another name.") from None
    except OSError as exc:
        raise SaveError(f"cannot write {path}: {exc.strerror or exc}") from None

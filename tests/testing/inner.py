"""Running an inner test file of the kit's users with pytester, in a subprocess (so that
the plugin loads as a user's run loads it, through its entry point)."""

from __future__ import annotations

import pytest

HEADER = """
import json
import mailbus
import pytest
"""


def run(pytester: pytest.Pytester, body: str, *args: str, **files: str) -> pytest.RunResult:
    pytester.makepyfile(HEADER + body)
    for name, text in files.items():
        pytester.path.joinpath(name.replace("__", ".")).write_text(text)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)

"""Shared by every test directory: sets the property tests' timing-free Hypothesis
profile, puts tests/ on sys.path so that any test imports the
one bounded-wait helper, `from waiting import eventually` (and the Pilot twin `until`),
starts the loopback mail stack once for the whole run, for whichever area needs it, and
checks the `extra` of every trace event emitted in this process against its kind's
declaration (mailbus.event_kind): a test whose code emits an undeclared or wrongly
typed key fails. Only tests pay for it: the tracer is wrapped here, not switched.

It also marks each test by what it needs (`mailstack`, `spark`, `browser`, `node`, read
from the fixtures it uses and, for a browser, from what its module drives), so that the
quick tier (scripts/test-quick) is a selection of the whole suite, never a second list."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from mailbus.trace import TraceEvent, Tracer
from mailbus.trace_catalog import all_kinds

# Hypothesis's deadline and its too-slow health check are timing assertions: on a shared
# two-core machine running three workers they fail tests that are right. Every
# property test inherits this profile (settings made at import time start from it).
settings.register_profile("mailbus", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mailbus")

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

# What a test needs (or costs), told by a fixture it uses, directly or through others.
NEEDS_BY_FIXTURE = {
    "mail_stack": "mailstack",
    "dovecot_stack": "mailstack",
    "cyrus_stack": "mailstack",
    "spark": "spark",
    "spark_processes": "spark",
    "chromium_page": "browser",
    "peer": "node",  # tests/foxglove: the reference client on Node
    "node": "node",  # tests/sessions/test_mcap_js: Foxglove's MCAP reader on Node
    # A Textual snapshot runs the whole app to a screen and compares its SVG: seconds each.
    "snap_compare": "slow",
}


def _drives_a_browser(module: ModuleType) -> bool:
    """The module, or a test helper module it takes names from, uses Playwright: the
    workbench's served-page tests launch chromium through such a helper."""
    helpers = {module}
    for value in vars(module).values():
        owner = sys.modules.get(getattr(value, "__module__", None) or "")
        if owner is not None and (getattr(owner, "__file__", None) or "").startswith(TESTS):
            helpers.add(owner)
    return any(
        (getattr(value, "__module__", None) or getattr(value, "__name__", "")).startswith(
            "playwright"
        )
        for helper in helpers
        for value in vars(helper).values()
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    browsers: dict[str, bool] = {}
    for item in items:
        needs = {
            NEEDS_BY_FIXTURE[name]
            for name in getattr(item, "fixturenames", ())
            if name in NEEDS_BY_FIXTURE
        }
        module = getattr(item, "module", None)
        if module is not None:
            if module.__name__ not in browsers:
                browsers[module.__name__] = _drives_a_browser(module)
            if browsers[module.__name__]:
                needs.add("browser")
        for need in sorted(needs - {mark.name for mark in item.iter_markers()}):
            item.add_marker(need)


@pytest.fixture(scope="session")
def mail_stack(dovecot_stack: Any) -> Any:
    """The mail stack outside tests/mail (which runs on every server): Dovecot's."""
    return dovecot_stack


@pytest.fixture(scope="session")
def dovecot_stack() -> Iterator[Any]:
    """One Dovecot + Postfix on loopback for the session (mailbus.stacks.mailstack); every
    test makes its own users, so the mail and stem tests share it."""
    from mailbus.stacks.mailstack import MailStack

    stack = MailStack()
    if not stack.has_postfix:
        # Said loudly: without root the SMTP side is not tested against Postfix.
        print(f"\nMAILSTACK: {stack.why_no_postfix}; SMTP goes through the LMTP relay")
    with stack:
        yield stack


@pytest.fixture(scope="session")
def cyrus_stack() -> Iterator[Any]:
    """One Cyrus IMAP + Postfix on loopback for the session (mailbus.stacks.cyrus_stack):
    the mail tests run on it as on Dovecot (tests/mail/conftest.py)."""
    from mailbus.stacks.cyrus_stack import CyrusStack

    with CyrusStack() as stack:
        yield stack


class ExtraCheck:
    """What the wrapped tracer found wrong, in order (thread-safe: events come from the
    engine's threads)."""

    def __init__(self) -> None:
        self.kinds = all_kinds()
        self.problems: list[str] = []
        self._lock = threading.Lock()

    def check(self, kind: str, extra: Mapping[str, object]) -> None:
        member = self.kinds.get(kind)
        if member is None or not extra:
            return  # a kind's spelling is test_trace_catalog's matter
        problems = member.extra_problems(extra)
        if problems:
            with self._lock:
                self.problems.extend(problems)

    def take(self) -> list[str]:
        """The problems found so far, forgotten (for a test that makes them on purpose)."""
        with self._lock:
            taken, self.problems = self.problems, []
        return taken


@pytest.fixture(scope="session")
def extra_check() -> Iterator[ExtraCheck]:
    check = ExtraCheck()
    emit, event = Tracer.emit, Tracer.event

    @functools.wraps(emit)
    def checked_emit(self: Tracer, trace_event: TraceEvent) -> None:
        check.check(trace_event.kind, trace_event.extra)
        emit(self, trace_event)

    @functools.wraps(event)
    def checked_event(self: Tracer, kind: str, **fields: Any) -> None:
        # Also without a listener, when event() builds nothing: the site is still seen.
        if not self._listeners:
            check.check(kind, fields.get("extra") or {})
        event(self, kind, **fields)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tracer, "emit", checked_emit)
        patch.setattr(Tracer, "event", checked_event)
        yield check


@pytest.fixture(autouse=True)
def _extra_keys_are_declared(extra_check: ExtraCheck) -> Iterator[None]:
    # An event a thread emits after its test ended fails the next test: late, not lost.
    yield
    problems = extra_check.take()
    if problems:
        pytest.fail(
            "trace events with an `extra` their kind does not declare (declare it on the "
            "kind's enum member, mailbus.event_kind.Extra):\n" + "\n".join(sorted(set(problems))),
            pytrace=False,
        )

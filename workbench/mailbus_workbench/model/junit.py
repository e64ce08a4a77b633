"""A test run's JUnit XML report (what `mailbus test --junit-xml` writes) as the Tests
view's rows: each test with its outcome, duration, node id and failure text, and each
check under it (an expectation met, with its observed latency from the report's
properties; an expectation failed, from the failure's text).

The XML is parsed with the standard library: the report is a file the workbench's own
`mailbus test` child wrote into a private temporary folder, not input from elsewhere,
and the interpreter's expat (2.4.1 and later) refuses the entity expansions that
defusedxml guards against; ElementTree never fetches external entities.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from enum import Enum

# The kit writes one property per expectation met: "mailbus <kind> <name>" = seconds.
CHECK_PROPERTY = "mailbus "


class JunitError(ValueError):
    """The report cannot be read as JUnit XML; the message says why."""


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # a fixture or the collection failed, not an assertion
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation of a test: what it checked, whether it held, and (met) the
    latency observed."""

    what: str
    passed: bool
    latency_s: float | None = None


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    classname: str
    file: str
    line: int | None
    duration_s: float
    outcome: Outcome
    message: str = ""  # the failure's one line
    text: str = ""  # the failure's report: near misses, timeline, traceback
    checks: tuple[Check, ...] = ()

    @property
    def node_id(self) -> str:
        """pytest's id of the test (`test_x.py::TestC::test_p[1]`), to run it again."""
        module = self.file.removesuffix(".py").replace("/", ".")
        classes = self.classname.removeprefix(module).strip(".")
        parts = [self.file, *(c for c in classes.split(".") if c), self.name]
        return "::".join(parts)

    @property
    def failed(self) -> bool:
        return self.outcome in (Outcome.FAILED, Outcome.ERROR)


@dataclass(frozen=True, slots=True)
class JunitReport:
    cases: tuple[CaseResult, ...] = ()
    counts: dict[Outcome, int] = field(default_factory=dict)
    duration_s: float = 0.0

    def summary(self) -> str:
        if not self.cases:
            return "no tests"
        shown = [f"{self.counts.get(o, 0)} {o.value}" for o in Outcome if self.counts.get(o)]
        return f"{', '.join(shown)} in {self.duration_s:.2f} s"


def _number(text: str | None) -> float:
    try:
        return float(text or 0.0)
    except ValueError:
        return 0.0


def failed_checks(text: str) -> list[Check]:
    """The expectations a failure's report names: the kit writes each failed one as a
    paragraph that starts `expected ...`."""
    found = []
    for paragraph in text.split("\n\n"):
        first = paragraph.strip().split("\n", 1)[0]
        if first.startswith("expected "):
            found.append(Check(first.split(":", 1)[0], False))
    return found


def _case(element: ET.Element) -> CaseResult:
    outcome, message, text = Outcome.PASSED, "", ""
    for tag, kind in (("failure", Outcome.FAILED), ("error", Outcome.ERROR)):
        problem = element.find(tag)
        if problem is not None:
            outcome = kind
            message = problem.get("message", "").split("\n", 1)[0]
            text = problem.text or message
            break
    else:
        skipped = element.find("skipped")
        if skipped is not None:
            outcome, message = Outcome.SKIPPED, skipped.get("message", "")
    checks = [
        Check(p.get("name", "").removeprefix(CHECK_PROPERTY), True, _number(p.get("value")))
        for p in element.iter("property")
        if p.get("name", "").startswith(CHECK_PROPERTY)
    ]
    checks += failed_checks(text)
    line = element.get("line")
    return CaseResult(
        name=element.get("name", "?"),
        classname=element.get("classname", ""),
        file=element.get("file", ""),
        line=int(line) + 1 if line and line.isdigit() else None,  # pytest's lines count from 0
        duration_s=_number(element.get("time")),
        outcome=outcome,
        message=message,
        text=text,
        checks=tuple(checks),
    )


def parse_junit(data: str | bytes) -> JunitReport:
    """The test cases of a JUnit XML report, in the order they ran."""
    try:
        root = ET.fromstring(data)  # noqa: S314 (our own child's report: see above)
    except ET.ParseError as exc:
        raise JunitError(f"the test report is not XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JunitError(f"the test report is not JUnit XML (its root is <{root.tag}>)")
    cases = tuple(_case(e) for e in root.iter("testcase"))
    counts: dict[Outcome, int] = {}
    for case in cases:
        counts[case.outcome] = counts.get(case.outcome, 0) + 1
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    return JunitReport(cases, counts, sum(_number(s.get("time")) for s in suites))

"""The Services filter, in the Topics filter's style: words narrow the calls listed.

    demo              calls of services whose name contains "demo"
    service=demo/add  calls of that service only (service~add: a part of its name)
    client=7f3a       calls from clients whose GID starts with 7f3a (the list shows the
                      first 8 characters); client~3a9: a part of the GID
    status=timed-out  calls with that status (answered, late, pending, timed-out, ...)
    Header=value      like the Topics filter: a header of the request (else the response)

Every word must match (case-insensitive)."""

from __future__ import annotations

from dataclasses import dataclass

from mailbus import query

from mailbus_workbench.model.services import Trace, TraceStatus

_STATUSES = {s.value.replace(" ", "-"): s for s in TraceStatus}


class FilterError(ValueError):
    """A word the filter cannot use (an unknown status)."""


@dataclass(frozen=True, slots=True)
class TraceFilter:
    service_parts: tuple[str, ...] = ()  # lower case
    service_exact: str | None = None
    client_prefix: str | None = None
    client_part: str | None = None
    statuses: frozenset[TraceStatus] = frozenset()
    headers: tuple[query.Term, ...] = ()

    @property
    def active(self) -> bool:
        return self != TraceFilter()

    def lists_service(self, service: str) -> bool:
        """Whether the service's own words let `service` through (the rest is per call)."""
        name = service.lower()
        if self.service_exact is not None and name != self.service_exact:
            return False
        return all(part in name for part in self.service_parts)

    def matches(self, trace: Trace, status: TraceStatus | None = None) -> bool:
        """`status`: the call's status now (needed only when the filter names one)."""
        if not self.lists_service(trace.service):
            return False
        client = trace.client_gid.lower()
        if self.client_prefix is not None and not client.startswith(self.client_prefix):
            return False
        if self.client_part is not None and self.client_part not in client:
            return False
        if self.statuses and status not in self.statuses:
            return False
        event = trace.request or trace.response
        return event is not None and all(term.matches(event) for term in self.headers)


def parse(text: str) -> TraceFilter:
    """The filter box's text as a filter; FilterError names a word it cannot use."""
    parts: list[str] = []
    exact = client_prefix = client_part = None
    statuses: set[TraceStatus] = set()
    headers: list[query.Term] = []
    for word in text.split():
        terms = query.parse(word).terms
        if not terms:
            parts.append(word.lower())
            continue
        term = terms[0]
        if not term.value and term.name in ("service", "client", "status"):
            continue  # still being typed
        if term.name == "service":
            if term.exact:
                exact = term.value
            else:
                parts.append(term.value)
        elif term.name == "client":
            if term.exact:
                client_prefix = term.value
            else:
                client_part = term.value
        elif term.name == "status":
            status = _STATUSES.get(term.value.replace("_", "-"))
            if status is None:
                known = ", ".join(sorted(_STATUSES))
                raise FilterError(f"unknown status {term.value!r} (one of {known})")
            statuses.add(status)
        else:
            headers.append(term)
    return TraceFilter(
        tuple(parts), exact, client_prefix, client_part, frozenset(statuses), tuple(headers)
    )

"""Fixtures of the Stem tests: trace recorders, in-process contexts, hub clean-up."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from mailbus import Context
from mailbus.stem import Hub
from stem_helpers import Recorder


@pytest.fixture
def recorder() -> Callable[[Hub], Recorder]:
    def attach(hub: Hub) -> Recorder:
        rec = Recorder()
        hub.tracer.add_listener(rec)
        return rec

    return attach


@pytest.fixture
def ctx() -> Iterator[Context]:
    with Context() as context:
        yield context


@pytest.fixture
def ctx2() -> Iterator[Context]:
    with Context() as context:
        yield context


@pytest.fixture
def hubs() -> Iterator[Callable[..., Hub]]:
    """Make hubs that are closed (thread stopped, inboxes left) after the test."""
    made: list[Hub] = []

    def make(name: str, **kwargs: object) -> Hub:
        hub = Hub(name, **kwargs)  # type: ignore[arg-type]
        made.append(hub)
        return hub

    yield make
    for hub in made:
        hub.close()

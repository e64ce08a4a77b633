from collections.abc import Iterator

import mailbus
import pytest
from mailbus.trace import TraceEvent


@pytest.fixture
def ctx() -> Iterator[mailbus.Context]:
    with mailbus.Context() as context:
        yield context


@pytest.fixture
def events(ctx: mailbus.Context) -> list[TraceEvent]:
    recorded: list[TraceEvent] = []
    ctx.tracer.add_listener(recorded.append)
    return recorded

"""The pytest plugin (entry point `pytest11`: `mailbus = mailbus.testing.plugin`).

Fixtures: `bus`, `expect`, `system`, `mock_service`, `faults`, `outage`, `golden`; options
`--mailbus-transport`, `--mailbus-config`, `--mailbus-seed`, `--mailbus-update`; the
marker `mailbus_transports(...)` runs a test once per transport named. Expectations and
strict mocks are verified when the test function returns, so that their failures are
the test's; a failed test's report gets the faults' seed and the tail of each system
process's output. An `async def` test of the kit's fixtures runs on pytest-asyncio
without a mark of its own.
"""

from __future__ import annotations

import inspect
import random
import warnings
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailbus.extras import needs_extra

with needs_extra("mailbus.testing", "test"):
    import pytest

from mailbus.stacks.mail_servers import SERVERS
from mailbus.testing.buses import (
    TRANSPORT_NAMES,
    Bus,
    BusError,
    PostOfficeDaemon,
    configured_bus,
    inprocess_bus,
    mail_bus,
    postoffice_bus,
)
from mailbus.testing.expect import Expect
from mailbus.testing.faults import FaultPlan
from mailbus.testing.golden_run import Golden
from mailbus.testing.mocks import MockService
from mailbus.testing.system import System

MARKER = "mailbus_transports"
KIT_FIXTURES = {"bus", "expect", "system", "mock_service", "faults", "golden", "outage"}
ASYNC_MARKS = {"asyncio", "anyio", "trio"}


@dataclass(slots=True)
class Kit:
    """What one test armed, for the checks when it returns and for its report."""

    expect: Expect | None = None
    mocks: list[MockService] = field(default_factory=list)
    system: System | None = None
    faults: list[FaultPlan] = field(default_factory=list)  # plans applied, with their seed


KIT = pytest.StashKey[Kit]()


def kit_of(node: pytest.Item) -> Kit:
    kit = node.stash.get(KIT, None)
    if kit is None:
        kit = node.stash[KIT] = Kit()
    return kit


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mailbus", "Mailbus testing kit (mailbus.testing)")
    group.addoption(
        "--mailbus-transport",
        choices=TRANSPORT_NAMES,
        default="inprocess",
        help="what the bus fixture runs on: in-process (default), a PostOffice daemon the "
        "kit starts, or a loopback mail server",
    )
    group.addoption(
        "--mailbus-config",
        metavar="FILE",
        default=None,
        help="run the bus on these options (your own system) instead of --mailbus-transport",
    )
    group.addoption(
        "--mailbus-mail-server",
        choices=SERVERS,
        default=None,
        help="the IMAP server of the loopback mail stack (--mailbus-transport=mail): "
        "dovecot (default) or cyrus",
    )
    group.addoption(
        "--mailbus-seed", type=int, default=None, help="the seed of every faults() call"
    )
    group.addoption(
        "--mailbus-update",
        action="store_true",
        default=False,
        help="rewrite golden files from this run's outputs",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-asyncio's, which warns
def pytest_configure(config: pytest.Config) -> None:
    # pytest-asyncio warns on every run of a project that has not set its fixture loop
    # scope, though the kit has no async fixture: the kit's users do not get that
    # warning (a warning filter, scoped as pytest scopes its configure-time filters).
    warnings.filterwarnings(
        "ignore",
        message=".*asyncio_default_fixture_loop_scope.* is unset",
        category=pytest.PytestDeprecationWarning,
    )
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*names): run the test once on each transport named "
        f"({', '.join(TRANSPORT_NAMES)})",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "mailbus_transport" not in metafunc.fixturenames:
        return
    names = list(marker.args) or list(TRANSPORT_NAMES)
    unknown = [n for n in names if n not in TRANSPORT_NAMES]
    if unknown:
        raise pytest.UsageError(
            f"{MARKER}: unknown transport {unknown[0]!r} (known: {', '.join(TRANSPORT_NAMES)})"
        )
    metafunc.parametrize("mailbus_transport", names, indirect=True)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """An `async def` test of the kit's fixtures runs on pytest-asyncio without
    `@pytest.mark.asyncio` (in its strict mode, the default, it would be skipped as
    "not natively supported"): the mark is added here, unless another async plugin's
    mark (anyio, trio) claims the test."""
    if not inspect.iscoroutinefunction(obj) or not collector.config.pluginmanager.hasplugin(
        "asyncio"
    ):
        return None
    marks = {m.name for m in getattr(obj, "pytestmark", ())}
    marks |= {m.name for m in collector.iter_markers()}  # a class's or a module's
    if marks & ASYNC_MARKS:
        return None
    if set(inspect.signature(obj).parameters) & KIT_FIXTURES:
        pytest.mark.asyncio(obj)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    result = yield
    kit = item.stash.get(KIT, None)
    if kit is not None:
        failures = []
        if kit.expect is not None:
            failures += kit.expect.verify()
            item.user_properties.extend(kit.expect.latencies())
        for mock in kit.mocks:
            failures += mock.problems()
        if failures:
            # The reports say everything: no traceback of the plugin's own frame.
            pytest.fail("\n\n".join(failures), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    kit = item.stash.get(KIT, None)
    if kit is not None and report.failed:
        if kit.faults:
            plans = "\n".join(plan.describe() for plan in kit.faults)
            rerun = f"rerun with --mailbus-seed={kit.faults[-1].seed}"
            report.sections.append(("mailbus faults", f"{plans}\n{rerun}"))
        if kit.system is not None:
            for name, output in kit.system.outputs():
                report.sections.append((f"mailbus system: {name} (last lines)", output))
    return report


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def mailbus_postoffice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostOfficeDaemon]:
    """One PostOffice daemon on a free loopback port for the run (a group per test)."""
    daemon = PostOfficeDaemon(tmp_path_factory.mktemp("mailbus-postoffice"))
    yield daemon
    daemon.stop()


@pytest.fixture(scope="session")
def mailbus_mail_stack(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One loopback mail server for the run (an account per test)."""
    from mailbus.testing.mailstack_link import start_mail_stack

    stack = start_mail_stack(request.config.getoption("mailbus_mail_server") or "dovecot")
    yield stack
    stack.stop()


@pytest.fixture
def mailbus_transport(request: pytest.FixtureRequest) -> str:
    """The transport of this test: the marker's parameter, else --mailbus-transport."""
    param = getattr(request, "param", None)
    return str(param) if param is not None else str(request.config.getoption("mailbus_transport"))


@pytest.fixture
def bus(request: pytest.FixtureRequest, mailbus_transport: str) -> Iterator[Bus]:
    """A started context on the test's transport, its receiving side checked live."""
    config_file = request.config.getoption("mailbus_config")
    parametrized = getattr(request.node, "callspec", None) is not None and (
        "mailbus_transport" in request.node.callspec.params
    )
    if config_file and not parametrized:
        made = configured_bus(str(config_file))
    elif mailbus_transport == "postoffice":
        made = postoffice_bus(request.getfixturevalue("mailbus_postoffice"))
    elif mailbus_transport == "mail":
        made = mail_bus(request.getfixturevalue("mailbus_mail_stack"))
    else:
        made = inprocess_bus()
    yield made
    made.close()


@pytest.fixture
def expect(request: pytest.FixtureRequest, bus: Bus) -> Iterator[Expect]:
    """Arm expectations before the trigger: `expect.topic(...)`, `.never`, `.service`,
    `.rate`; all are verified when the test returns."""
    armed = Expect(bus)
    kit_of(request.node).expect = armed
    yield armed
    armed.close()


@pytest.fixture
def system(request: pytest.FixtureRequest, bus: Bus, tmp_path: Path) -> Iterator[System]:
    """Start the system's participants: `system.start(command or callable, ready=[...])`."""
    started = System(bus, tmp_path)
    kit_of(request.node).system = started
    yield started
    started.stop()


@pytest.fixture
def mock_service(request: pytest.FixtureRequest, bus: Bus) -> Iterator[Callable[..., MockService]]:
    """`mock_service(name, from_session=... | responses=..., match=, strict=)`."""
    kit = kit_of(request.node)

    def make(name: str, **options: Any) -> MockService:
        mock = MockService(bus, name, **options)
        kit.mocks.append(mock)
        return mock

    yield make
    for mock in kit.mocks:
        mock.close()


@pytest.fixture
def faults(request: pytest.FixtureRequest, bus: Bus) -> Iterator[Callable[..., FaultPlan]]:
    """`faults(seed=None, drop=0, delay=(p, s), duplicate=0, reorder=0)` on what the bus
    sends from now on; the seed is printed with a failure (--mailbus-seed replays it)."""
    kit = kit_of(request.node)
    forced = request.config.getoption("mailbus_seed")

    def inject(
        seed: int | None = None,
        *,
        drop: float = 0.0,
        delay: tuple[float, float] | float = 0.0,
        duplicate: float = 0.0,
        reorder: float = 0.0,
    ) -> FaultPlan:
        if forced is not None:
            seed = forced
        elif seed is None:
            seed = random.SystemRandom().randrange(2**32)
        delay_pair = delay if isinstance(delay, tuple) else (1.0 if delay else 0.0, delay)
        plan = FaultPlan(seed, drop, delay_pair, duplicate, reorder)
        bus.faults.inject(plan)
        kit.faults.append(plan)
        return plan

    yield inject
    bus.faults.inject(None)


@pytest.fixture
def golden(request: pytest.FixtureRequest, bus: Bus) -> Golden:
    """`golden.check(session, outputs=..., ignore=..., order=...)`; the golden file is
    `golden/<test name>.json` beside the test file unless `file=` names one."""
    system = request.getfixturevalue("system") if "system" in request.fixturenames else None
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)
    default = Path(request.node.path).parent / "golden" / f"{name}.json"
    return Golden(bus, system, bool(request.config.getoption("mailbus_update")), default)


@pytest.fixture
def outage(bus: Bus) -> Iterator[Callable[[], AbstractContextManager[None]]]:
    """`with outage(): ...`: the mail server refuses mail for the block (its SMTP side
    is stopped, then started again). Mail transport only."""
    down: list[bool] = []

    @contextmanager
    def window() -> Iterator[None]:
        if bus.server_switch is None:
            raise BusError(
                f"an outage is simulated on the mail transport, not on {bus.transport}: "
                '@pytest.mark.mailbus_transports("mail") or --mailbus-transport=mail'
            )
        stop, start = bus.server_switch
        stop()
        down.append(True)
        try:
            yield
        finally:
            start()
            down.pop()

    yield window
    if down and bus.server_switch is not None:
        bus.server_switch[1]()

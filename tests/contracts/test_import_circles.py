"""No import circle at run time: among the modules of the engine, the workbench and its
fixtures, no chain of imports leads back to where it started, counting imports inside
functions and leaving out those under `if TYPE_CHECKING:` (never executed).

The layers contracts (pyproject.toml) order the packages; inside one layer or one
subpackage only this check stops two modules from importing each other."""

from __future__ import annotations

import graphlib
from pathlib import Path

import grimp
import pytest

PACKAGES = ("mailbus", "mailbus_workbench", "workbench_fixtures")


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)


def import_circle(graph: grimp.ImportGraph) -> list[str] | None:
    """One circle of imports (its modules, the first repeated at the end), or None."""
    modules = graph.modules
    sorter = graphlib.TopologicalSorter(
        {m: graph.find_modules_directly_imported_by(m) & modules for m in sorted(modules)}
    )
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))
    return None


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return _graph()


def test_no_module_imports_itself_back_at_run_time(graph: grimp.ImportGraph) -> None:
    circle = import_circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_a_circle_made_through_a_function_level_import_is_found(
    graph: grimp.ImportGraph,
) -> None:
    # The shape the screenshot fixtures once had: a module-level import one way, an
    # import inside a function the other way.
    graph.add_import(importer="workbench_fixtures.clock", imported="workbench_fixtures.events")
    try:
        circle = import_circle(graph)
    finally:
        graph.remove_import(
            importer="workbench_fixtures.clock", imported="workbench_fixtures.events"
        )
    assert circle is not None
    assert circle[0] == circle[-1]
    assert {"workbench_fixtures.clock", "workbench_fixtures.events"} <= set(circle)


def test_only_an_import_under_type_checking_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "circles"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "office.py").write_text("from circles import clerk\n")
    (package / "clerk.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from circles.office import Office\n"
        "def serve():\n"
        "    from circles import counter\n"
    )
    (package / "counter.py").write_text("def count():\n    from circles import office\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    circle = import_circle(grimp.build_graph("circles", exclude_type_checking_imports=True))
    assert circle is not None
    assert set(circle) == {"circles.office", "circles.clerk", "circles.counter"}
    (package / "counter.py").write_text("def count():\n    pass\n")
    assert import_circle(grimp.build_graph("circles", exclude_type_checking_imports=True)) is None

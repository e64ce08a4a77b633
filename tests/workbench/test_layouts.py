"""Layouts (Pilot): what a user arranged comes back after a restart, a named layout opens
with `--layout NAME` and from the palette, a shared file imports, and a bad file is said
while the workbench still starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus import cli
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.find_screen import FindScreen
from mailbus_workbench.layouts import LayoutPrompt, LayoutStore, config_key
from mailbus_workbench.model.layout import Layout
from mailbus_workbench.view_table import VIEWS
from mailbus_workbench.views.plot import PlotView
from textual.command import CommandPalette
from textual.widgets import Input, OptionList, TabbedContent
from wb_helpers import until
from workbench_fixtures.events import fixed_app

SIZE = (130, 38)


def store() -> LayoutStore:
    return LayoutStore.for_config(None, [view_id for view_id, _, _ in VIEWS])


def listed_series(app: WorkbenchApp) -> list[str]:
    """The series as the Plot view's list draws them (first line of each option)."""
    options = app.query_one("#plot-series", OptionList)
    return [
        str(options.get_option_at_index(i).prompt).split("\n")[0].lstrip("● ").split(" ")[0]
        for i in range(options.option_count)
    ]


def shown_tab(app: WorkbenchApp) -> str:
    return app.main_screen.query_one("#views", TabbedContent).active


def notified(app: WorkbenchApp) -> list[str]:
    return [n.message for n in textual_internals.notifications(app)]


async def plot_first(pilot: object, app: WorkbenchApp, series: str) -> None:
    """P, then the first series typed into the box (it has the keys while nothing is plotted)."""
    await pilot.pause()  # type: ignore[attr-defined]  # the start's own focus first
    await pilot.press("P")  # type: ignore[attr-defined]
    box = app.query_one("#plot-add", Input)
    await until(pilot, lambda: app.focused is box, "the Plot view's box")  # type: ignore[arg-type]
    await pilot.press(*series, "enter")  # type: ignore[attr-defined]
    await until(pilot, lambda: listed_series(app) == [series], series)  # type: ignore[arg-type]


async def arrange(app: WorkbenchApp) -> None:
    """As a user would: filter the topics, widen the tree, plot two series, zoom out."""
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"robot")
        await pilot.press("enter", "escape", "right_square_bracket", "right_square_bracket")
        await plot_first(pilot, app, "robot/pose.x")
        # The box keeps the keys after a series is added: the next one is typed straight in.
        await pilot.press(*"rate(sensors/temperature)", "enter")
        await until(pilot, lambda: len(listed_series(app)) == 2, "two series")
        await pilot.press("escape")  # out of the box: the view's keys again
        await pilot.press("minus")  # 30 s -> 60 s
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "Find")
        await pilot.press(*"celsius>25")
        await pilot.press("enter", "escape")
        await until(pilot, lambda: not isinstance(app.screen, FindScreen), "Find closed")
        await pilot.press("q")


@pytest.mark.slow
async def test_the_layout_comes_back_after_a_restart() -> None:
    await arrange(fixed_app(layouts=store()))
    assert store().last_file.exists()

    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shown_tab(app) == "plot", "the Plot view restored")
        await until(pilot, lambda: len(listed_series(app)) == 2, "the series restored")
        assert listed_series(app) == ["robot/pose.x", "rate(sensors/temperature)"]
        status = str(app.query_one("#plot-status").render())
        assert status.startswith("last 60 s")
        assert app.query_one("#topic-filter", Input).value == "robot"
        left = app.query_one("#topics-left")
        assert left.styles.width is not None and left.styles.width.value == 42  # 34 + 4 + 4
        assert not any("Layout" in text for text in notified(app))
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "Find")
        assert app.screen.query_one("#find-query", Input).value == "celsius>25"


@pytest.mark.slow
async def test_without_a_store_nothing_is_remembered() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("P", "q")
    assert not store().last_file.exists()
    assert not (store().directory).exists()


@pytest.mark.slow
async def test_a_named_layout_saved_from_the_palette_opens_by_name() -> None:
    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await plot_first(pilot, app, "robot/pose.y")
        await pilot.press("ctrl+p", *"save layout")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LayoutPrompt), "the name prompt")
        await pilot.press(*"bad/name", "enter")
        error = app.screen.query_one("#layout-error")
        await until(pilot, lambda: "not a layout name" in str(error.render()), "the refusal")
        box = app.screen.query_one("#layout-input", Input)
        box.value = ""
        await pilot.press(*"poses", "enter")
        await until(pilot, lambda: not isinstance(app.screen, LayoutPrompt), "the prompt gone")
    assert store().names() == ["poses"]

    # Opened by name (what `mailbus --layout poses` hands the app), over another last one.
    store().save_last(Layout(view="services"))
    app = fixed_app(layouts=store(), layout="poses")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: shown_tab(app) == "plot", "the named layout's view")
        await until(pilot, lambda: listed_series(app) == ["robot/pose.y"], "its series")


@pytest.mark.slow
async def test_switching_layouts_from_the_palette() -> None:
    store().save_named("temps", Layout(view="plot", plot_series=("sensors/temperature.celsius",)))
    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p", *"layout: temps")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: shown_tab(app) == "plot", "the Plot view")
        await until(
            pilot, lambda: listed_series(app) == ["sensors/temperature.celsius"], "the series"
        )


@pytest.mark.slow
async def test_a_shared_file_is_exported_and_imported(tmp_path: Path) -> None:
    shared = tmp_path / "team.toml"
    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await plot_first(pilot, app, "robot/pose.theta")
        await pilot.press("ctrl+p", *"export layout")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LayoutPrompt), "the path prompt")
        app.screen.query_one("#layout-input", Input).value = str(shared)
        await pilot.press("enter")
        await until(pilot, shared.exists, "the exported file")
    assert 'series = ["robot/pose.theta"]' in shared.read_text()

    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p", *"import layout")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LayoutPrompt), "the path prompt")
        app.screen.query_one("#layout-input", Input).value = str(tmp_path / "missing.toml")
        await pilot.press("enter")
        error = app.screen.query_one("#layout-error")
        await until(pilot, lambda: "no such file" in str(error.render()), "the refusal")
        app.screen.query_one("#layout-input", Input).value = str(shared)
        await pilot.press("enter")
        await until(pilot, lambda: shown_tab(app) == "plot", "the imported layout shown")
        await until(pilot, lambda: listed_series(app) == ["robot/pose.theta"], "its series")
    assert store().names() == ["team"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("view = [", "not valid TOML"),
        ('view = "nowhere"', "'nowhere' is no view"),
        ("[plot]\nwindow_s = -1", "plot.window_s"),
    ],
)
@pytest.mark.slow
async def test_a_corrupt_last_layout_is_said_and_the_workbench_starts(text: str, says: str) -> None:
    store().last_file.parent.mkdir(parents=True)
    store().last_file.write_text(text)
    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: any(says in m for m in notified(app)), "the error")
        message = next(m for m in notified(app) if says in m)
        assert message.startswith("Layout not restored:") and str(store().last_file) in message
        assert shown_tab(app) == "topics"
        await pilot.press("P")  # the workbench works
        await until(pilot, lambda: app.active_view_id == "plot", "the Plot view")
        await pilot.press("escape", "q")
    # The quit wrote a good layout over the bad one.
    assert store().load_last() == Layout(view="plot")


@pytest.mark.slow
async def test_a_series_no_longer_valid_is_said_and_the_rest_restored() -> None:
    store().save_last(
        Layout(view="plot", plot_series=("robot/pose.x[", "robot/pose.x"), plot_window_s=10.0)
    )
    app = fixed_app(layouts=store())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: listed_series(app) == ["robot/pose.x"], "the good series")
        await until(
            pilot, lambda: any("partly restored" in m for m in notified(app)), "the warning"
        )
        assert "robot/pose.x[" in next(m for m in notified(app) if "partly" in m)
        assert app.query_one(PlotView).window_s == 10.0


def test_the_cli_refuses_a_layout_name_that_cannot_be_a_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--layout", "../etc/passwd"]) == 2
    assert "is not a layout name" in capsys.readouterr().err


def test_the_cli_hands_the_layout_to_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    def run(self: WorkbenchApp) -> None:
        seen.append(self.layouts.name if self.layouts else None)
        if self.engine is not None:
            self.engine.stop()

    monkeypatch.setattr(WorkbenchApp, "run", run)
    assert cli.main(["--layout", "poses"]) == 0
    assert seen == ["poses"]


def test_each_config_remembers_its_own(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "mailbus.toml", tmp_path / "b" / "mailbus.toml"
    assert config_key(None) == "demo"
    assert config_key(str(a)) != config_key(str(b))
    assert config_key(str(a)).startswith("mailbus-")


async def test_a_layout_name_not_saved_is_said_and_the_workbench_starts() -> None:
    store().save_named("poses", Layout(view="plot"))
    app = fixed_app(layouts=store(), layout="posse")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: any("posse" in m for m in notified(app)), "the error")
        message = next(m for m in notified(app) if "posse" in m)
        assert "no layout named 'posse' (saved: poses)" in message
        assert shown_tab(app) == "topics"


def test_the_config_from_the_environment_keys_the_layout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[object] = []

    def run(self: WorkbenchApp) -> None:
        seen.append(self.layouts.store.config if self.layouts else None)
        if self.engine is not None:
            self.engine.stop()

    options = tmp_path / "lab.toml"
    options.write_text('transport = "inprocess"\n')
    monkeypatch.setattr(WorkbenchApp, "run", run)
    monkeypatch.setenv("MAILBUS_CONFIG_FILE", str(options))
    assert cli.main([]) == 0
    monkeypatch.delenv("MAILBUS_CONFIG_FILE")
    assert cli.main([]) == 0
    session = tmp_path / "session"
    session.mkdir()
    assert cli.main(["open", str(session)]) == 0  # a recording's viewing: nothing kept
    assert seen == [config_key(str(options)), "demo", None]

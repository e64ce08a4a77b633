"""Worker results are typed Textual messages: no workbench module hands
a result back with `call_from_thread` (an AST scan, shown to fail on a module that does),
and each worker's message is posted with what happened, then shown by its handler."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.server import ServerConfig, ServerThread
from mailbus.postoffice.store import HashParams
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.find_screen import FindScreen
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.screens import Confirm
from mailbus_workbench.views.analysis import AnalysisScreen
from mailbus_workbench.views.caller import CallerView
from mailbus_workbench.views.mailboxes import MailboxesView
from mailbus_workbench.views.publish import PublishView
from textual.message import Message
from textual.widgets import DataTable, Input, ProgressBar, Static, TextArea
from wb_helpers import Posted, until
from workbench_fixtures.events import fixed_app

SIZE = (140, 42)
PACKAGE = Path(__file__).parents[2] / "workbench" / "mailbus_workbench"
SESSION = Path(__file__).parents[2] / "sample_sessions" / "demo"
# Modules allowed to call back with call_from_thread, relative to the package: none.
STILL_CALLING_FROM_THREAD: set[str] = set()


def calls_from_thread(package: Path, allowed: set[str]) -> list[str]:
    """`path:line` of every use of `call_from_thread` in the package's modules (a call,
    or the bound method taken to call later), except in the `allowed` ones."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative in allowed:
            continue
        lines = sorted(
            node.lineno
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
            if (isinstance(node, ast.Attribute) and node.attr == "call_from_thread")
            or (isinstance(node, ast.Name) and node.id == "call_from_thread")
        )
        found += [f"{relative}:{line}" for line in lines]
    return found


def test_no_workbench_worker_calls_back_with_call_from_thread() -> None:
    assert calls_from_thread(PACKAGE, STILL_CALLING_FROM_THREAD) == []
    assert (PACKAGE / "views" / "publish.py").is_file()  # the scan looks where the views are


def test_the_scan_finds_a_call_from_thread(tmp_path: Path) -> None:
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "bad.py").write_text(
        "def worker(self):\n    result = 1\n    self.app.call_from_thread(self.show, result)\n"
    )
    (tmp_path / "held.py").write_text("def later(app):\n    back = app.call_from_thread\n")
    (tmp_path / "bare.py").write_text("from x import call_from_thread\ncall_from_thread(f)\n")
    (tmp_path / "views" / "queues.py").write_text("def w(self):\n    self.call_from_thread(f)\n")
    (tmp_path / "fine.py").write_text("def w(self):\n    self.post_message(Done())\n")
    assert calls_from_thread(tmp_path, {"views/queues.py"}) == [
        "bare.py:2",
        "held.py:2",
        "views/bad.py:3",
    ]
    assert calls_from_thread(tmp_path, set()) == [
        "bare.py:2",
        "held.py:2",
        "views/bad.py:3",
        "views/queues.py:2",
    ]


def kinds(posted: Posted, *types: type[Message]) -> list[type[Message]]:
    """The classes of the messages of `types` posted so far, in order."""
    return [type(m) for m in posted.messages if isinstance(m, types)]


def app_with(engine: EngineHost, tmp_path: Path) -> WorkbenchApp:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    return WorkbenchApp(engine=engine, settings=settings)


@pytest.mark.slow
async def test_published_then_shown(engine: EngineHost, tmp_path: Path) -> None:
    app = app_with(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("4")
        app.query_one("#publish-topic", Input).value = "lab/worker"
        app.query_one("#publish-body", TextArea).text = "1"
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(PublishView.Published), "the publish")
        published = posted.of(PublishView.Published)[0]
        assert isinstance(published, PublishView.Published)
        assert published.topic == "lab/worker" and published.message_id
        status = str(app.query_one("#publish-status", Static).render())
        assert f"published on lab/worker  {published.message_id}" in status
        assert not posted.of(PublishView.PublishFailed) and not posted.of(PublishView.Failed)


@pytest.mark.slow
async def test_engine_failed_then_a_publish_failed(tmp_path: Path) -> None:
    """A context that cannot start (shut down before the app starts it): EngineFailed is
    posted and shown; a publish then fails in the worker: PublishFailed, then Failed."""
    host = EngineHost(demo=False)
    host.context.shutdown()
    app = app_with(host, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await until(pilot, lambda: posted.of(WorkbenchApp.EngineFailed), "the start failure")
        failed = posted.of(WorkbenchApp.EngineFailed)[0]
        assert isinstance(failed, WorkbenchApp.EngineFailed)
        assert "init() runs once" in failed.error
        assert app.engine_error == failed.error
        assert any(
            n.message == f"Cannot start the engine: {failed.error}" and n.severity == "error"
            for n in textual_internals.notifications(app)
        )
        await pilot.pause()  # the initial focus settles before the view key
        await pilot.press("4")
        app.query_one("#publish-topic", Input).value = "lab/worker"
        app.query_one("#publish-body", TextArea).text = "1"
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(PublishView.Failed), "the refusal")
        assert kinds(posted, PublishView.PublishFailed, PublishView.Failed) == [
            PublishView.PublishFailed,
            PublishView.Failed,
        ]
        refused = posted.of(PublishView.PublishFailed)[0]
        assert isinstance(refused, PublishView.PublishFailed)
        # Said as what happened, not as a start still under way.
        assert "failed to start: " in refused.error and "init() runs once" in refused.error
        assert "still starting" not in refused.error
        assert posted.of(PublishView.Failed)[0].error == refused.error  # type: ignore[attr-defined]
        assert refused.error in str(app.query_one("#publish-status", Static).render())
        assert not posted.of(PublishView.Published)


@pytest.mark.slow
async def test_call_finished_then_listed(engine: EngineHost, tmp_path: Path) -> None:
    app = app_with(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("5")
        view = app.query_one(CallerView)
        assert view.call("echo", "abc", 2.0)
        assert view.call("silent", "x", 0.1)
        await until(pilot, lambda: len(posted.of(CallerView.Finished)) == 2, "both calls")
        records = sorted(
            (m.record for m in posted.of(CallerView.Finished)),  # type: ignore[attr-defined]
            key=lambda r: r.number,
        )
        assert [(r.service, r.ok, r.response) for r in records] == [
            ("echo", True, "cba"),
            ("silent", False, "no response within 0.1 s"),
        ]
        assert sorted(view.history, key=lambda r: r.number) == records
        assert app.query_one("#call-history", DataTable).row_count == 2


@pytest.mark.slow
async def test_analysis_progress_then_done() -> None:
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await app.push_screen(AnalysisScreen(str(SESSION)))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(AnalysisScreen.Done), "the analysis")
        order = kinds(posted, AnalysisScreen.Progress, AnalysisScreen.Done)
        assert order[-1] is AnalysisScreen.Done and order.count(AnalysisScreen.Done) == 1
        assert set(order[:-1]) == {AnalysisScreen.Progress}
        last = posted.of(AnalysisScreen.Progress)[-1]
        assert isinstance(last, AnalysisScreen.Progress)
        assert last.table == "" and last.done == last.total
        assert screen.query_one("#analysis-progress", ProgressBar).progress == last.total
        done = posted.of(AnalysisScreen.Done)[0]
        assert isinstance(done, AnalysisScreen.Done)
        assert done.error == "" and screen.tables is done.tables and not screen.running
        status = str(screen.query_one("#analysis-status", Static).render())
        assert status == ", ".join(f"{n}: {len(t)} rows" for n, t in done.tables.items())


@pytest.mark.slow
async def test_find_matched_then_searched_and_a_stale_match_is_dropped() -> None:
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "the Find screen")
        screen = app.screen
        assert isinstance(screen, FindScreen)
        screen.search("celsius>22.5")
        await until(pilot, lambda: posted.of(FindScreen.Searched), "the search")
        assert kinds(posted, FindScreen.Matched, FindScreen.Searched) == [
            FindScreen.Matched,
            FindScreen.Searched,
        ]
        matched = posted.of(FindScreen.Matched)[0]
        searched = posted.of(FindScreen.Searched)[0]
        assert isinstance(matched, FindScreen.Matched)
        assert isinstance(searched, FindScreen.Searched)
        assert matched.query == searched.query == "celsius>22.5"
        assert searched.found == len(matched.result.records) > 0
        assert screen.result is matched.result
        table = screen.query_one("#find-results", DataTable)
        assert table.row_count == searched.found
        # A worker's result for a query no longer typed: not shown, no Searched.
        screen.post_message(FindScreen.Matched("celsius<0", matched.result))
        await until(pilot, lambda: len(posted.of(FindScreen.Matched)) == 2, "the stale match")
        await pilot.pause()
        assert len(posted.of(FindScreen.Searched)) == 1
        assert table.row_count == searched.found


@pytest.mark.slow
async def test_mailboxes_listed_then_a_box_emptied(tmp_path: Path) -> None:
    store = tmp_path / "po.db"
    server = ServerThread(ServerConfig(store_path=store, port=0, hash_params=HashParams(log2_n=4)))
    server.start()
    try:
        with PostOfficeClient("127.0.0.1", server.port, timeout=10) as client:
            client.create_box("lab.a", "pw")
            client.create_box("lab.sender", "pw")
            client.check_out("lab.sender", "pw")
            for i in range(2):
                client.send("lab.a", f"Subject: note {i}\r\n\r\nbody\r\n".encode())
        settings = Settings(
            keymap_file=tmp_path / "k", templates_file=tmp_path / "t", postoffice_store=store
        )
        app = fixed_app(settings=settings)
        posted = Posted()
        async with app.run_test(size=(120, 36), message_hook=posted.hook) as pilot:
            await pilot.pause()
            await pilot.press("8")
            view = app.query_one(MailboxesView)
            await until(
                pilot,
                lambda: any(m.letters for m in posted.of(MailboxesView.MailboxesListed)),  # type: ignore[attr-defined]
                "a listing with the letters",
            )
            listed = next(
                m
                for m in posted.of(MailboxesView.MailboxesListed)
                if isinstance(m, MailboxesView.MailboxesListed) and m.letters
            )
            assert listed.store == store and listed.error == "" and listed.selected == "lab.a"
            assert [(b.name, b.letters) for b in listed.boxes] == [("lab.a", 2), ("lab.sender", 0)]
            assert [x.subject for x in listed.letters] == ["note 0", "note 1"]
            assert view.boxes == listed.boxes and view.shown_box == "lab.a"
            assert "2 mailboxes, 2 letters waiting" in str(
                app.query_one("#mailbox-summary", Static).render()
            )
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the question")
            await pilot.press("y")
            await until(pilot, lambda: posted.of(MailboxesView.MailboxChanged), "the change")
            changed = posted.of(MailboxesView.MailboxChanged)[0]
            assert isinstance(changed, MailboxesView.MailboxChanged)
            assert (changed.op, changed.name, changed.deleted, changed.error) == (
                "empty",
                "lab.a",
                2,
                "",
            )
            assert view.changes == 1
            assert any(
                n.message == "empty: lab.a (2 letters deleted)"
                for n in textual_internals.notifications(app)
            )
            await until(pilot, lambda: view.letters == [], "the listing after the change")
    finally:
        server.stop()

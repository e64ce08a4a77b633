"""The Mailboxes screen over a real PostOffice daemon's store."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.server import ServerConfig, ServerThread
from mailbus.postoffice.store import HashParams
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.mailboxes import MailboxesView
from textual.widgets import DataTable, Static
from wb_helpers import until
from workbench_fixtures.events import fixed_app


async def test_mailboxes_with_letter_counts(tmp_path: Path) -> None:
    store = tmp_path / "po.db"
    server = ServerThread(ServerConfig(store_path=store, port=0, hash_params=HashParams(log2_n=4)))
    server.start()
    try:
        with PostOfficeClient("127.0.0.1", server.port, timeout=10) as client:
            client.create_box("alice", "pw-a")
            client.create_box("bob", "pw-b")
            client.check_out("alice", "pw-a")
            for i in range(3):
                client.send("bob", f"letter {i}".encode())
        settings = Settings(
            keymap_file=tmp_path / "k", templates_file=tmp_path / "t", postoffice_store=store
        )
        app = fixed_app(settings=settings)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            await pilot.press("8")
            view = app.query_one(MailboxesView)
            await until(pilot, lambda: view.loads > 0, "the listing")
            assert {(b.name, b.letters) for b in view.boxes} == {("alice", 0), ("bob", 3)}
            table = app.query_one("#mailbox-table", DataTable)
            assert table.row_count == 2
            assert "2 mailboxes, 3 letters waiting" in str(
                app.query_one("#mailbox-summary", Static).render()
            )
    finally:
        server.stop()


@pytest.mark.slow
async def test_mailboxes_without_a_store(tmp_path: Path) -> None:
    settings = Settings(
        keymap_file=tmp_path / "k",
        templates_file=tmp_path / "t",
        postoffice_store=tmp_path / "none.db",
    )
    app = fixed_app(settings=settings)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("8")
        view = app.query_one(MailboxesView)
        await until(pilot, lambda: view.loads > 0, "the listing")
        assert "no PostOffice store" in view.error and view.boxes == []


@pytest.mark.slow
async def test_a_box_is_shown_emptied_and_removed_after_confirmation(tmp_path: Path) -> None:
    """The selected box's letters are listed; `e` empties and `x` removes it, each after a
    confirmation that can say no; the daemon's own state changes, not only the view."""
    from mailbus_workbench.screens import Confirm

    store = tmp_path / "po.db"
    server = ServerThread(ServerConfig(store_path=store, port=0, hash_params=HashParams(log2_n=4)))
    server.start()
    try:
        with PostOfficeClient("127.0.0.1", server.port, timeout=10) as client:
            client.create_box("lab.a", "pw")
            client.create_box("lab.sender", "pw")
            client.check_out("lab.sender", "pw")
            for i in range(3):
                client.send("lab.a", f"Subject: note {i}\r\n\r\nbody\r\n".encode())
        settings = Settings(
            keymap_file=tmp_path / "k", templates_file=tmp_path / "t", postoffice_store=store
        )
        app = fixed_app(settings=settings)

        def letters(name: str) -> int | None:
            boxes = server.call(lambda: server.office.boxes)
            return len(boxes[name].letters) if name in boxes else None

        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause()
            await pilot.press("8")
            view = app.query_one(MailboxesView)
            await until(pilot, lambda: view.loads > 0 and view.boxes, "the listing")
            assert view.selected == "lab.a"
            await until(pilot, lambda: len(view.letters) == 3, "the letters of lab.a")
            assert [x.subject for x in view.letters] == ["note 0", "note 1", "note 2"]
            # Say no: nothing happens.
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the question")
            await pilot.press("n")
            await pilot.pause()
            assert letters("lab.a") == 3 and view.changes == 0
            # Say yes: the daemon's box is emptied.
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the question")
            await pilot.press("y")
            await until(pilot, lambda: view.changes == 1, "the change")
            assert letters("lab.a") == 0
            await until(pilot, lambda: view.letters == [], "the emptied listing")
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the question")
            await pilot.press("y")
            await until(pilot, lambda: view.changes == 2, "the removal")
            assert letters("lab.a") is None
            await until(pilot, lambda: "lab.a" not in {b.name for b in view.boxes}, "the list")
    finally:
        server.stop()

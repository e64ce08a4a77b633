"""The Mailboxes screen over a real PostOffice daemon's store."""

from __future__ import annotations

from pathlib import Path

from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.server import ServerConfig, ServerThread
from mailbus.postoffice.store import HashParams
from mailbus_workbench.fixtures import fixed_app
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.mailboxes import MailboxesView
from textual.widgets import DataTable, Static
from wb_helpers import until


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

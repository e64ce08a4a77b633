"""The Queues view on a real outbox directory: listing, retry and purge with confirmation,
and refusal while another holder has the outbox lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.listing import list_outbox
from mailbus.outbox.lock import OutboxLock
from mailbus.outbox.storage import Destination, Entry, Metadata, Schedule
from mailbus_workbench.model import queues
from mailbus_workbench.screens import Confirm
from mailbus_workbench.views.queues import QueuesView
from mailbus_workbench.widgets.queue_list import QueueList
from wb_helpers import Posted, until
from workbench_fixtures.events import fixed_app

SIZE = (140, 36)


def add(storage: FsStorage, n: int, attempts: int = 0) -> Entry:
    data = f"Message-ID: <q{n}@x>\r\nSubject: job {n}\r\n\r\nbody {n}\r\n".encode()
    enqueuer = storage.enqueue()
    enqueuer.write(data)
    meta = Metadata(f"<q{n}@x>", "s@x.org", (f"r{n}@y.org",), f"job {n}", len(data), 1)
    (entry,) = enqueuer.commit(
        [Destination(meta, Schedule(attempts, 2**62, 0, "refused" * bool(attempts)))]
    )
    return entry


@pytest.fixture
def outbox(tmp_path: Path) -> tuple[Path, Entry, Entry]:
    directory = tmp_path / "outbox"
    storage = FsStorage(directory)
    queued = add(storage, 1)
    dead = storage.dead_letter(storage.send_start(add(storage, 2, attempts=3)))
    return directory, queued, dead


def test_outbox_dir_from_environment_or_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAILBUS_OUTBOX_DIR", raising=False)
    assert queues.outbox_dir({}) is None
    assert queues.outbox_dir({"outbox": {"dir": "/a/b"}}) == Path("/a/b")
    monkeypatch.setenv("MAILBUS_OUTBOX_DIR", "/c")
    assert queues.outbox_dir({"outbox": {"dir": "/a/b"}}) == Path("/c")


def test_retry_and_purge_functions(outbox: tuple[Path, Entry, Entry]) -> None:
    directory, queued, dead = outbox
    assert queues.retry(directory, [dead.id]) == [dead.id]
    states = {i.id: i.state for i in list_outbox(directory)}
    assert states[dead.id] == "queued"
    assert queues.purge(directory, [queued.id]) == [queued.id]
    assert queued.id not in {i.id for i in list_outbox(directory)}


@pytest.mark.slow
async def test_queue_view_lists_retries_and_purges(outbox: tuple[Path, Entry, Entry]) -> None:
    directory, queued, dead = outbox
    app = fixed_app(outbox_dir=directory)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("6")
        view = app.query_one(QueuesView)
        await until(pilot, lambda: view.loads > 0, "the listing")
        assert {(i.id, i.state) for i in view.items} == {(queued.id, "queued"), (dead.id, "dead")}
        table = app.query_one("#queue-table", QueueList)
        row = [i.id for i in view.items].index(dead.id)
        table.move_cursor(row=row)
        await pilot.pause()
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        await pilot.press("n")  # nothing happens when the user says no
        await pilot.pause()
        assert not posted.of(QueuesView.Changed)
        assert {i.state for i in list_outbox(directory) if i.id == dead.id} == {"dead"}
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        listed = len(posted.of(QueuesView.Listed))
        await pilot.press("y")
        await until(pilot, lambda: posted.of(QueuesView.Changed), "the retry")
        change = posted.of(QueuesView.Changed)[-1]
        assert (change.verb, change.ids, change.error) == ("retry", [dead.id], "")  # type: ignore[attr-defined]
        # The reload the change asked for comes back as a listing message.
        await until(pilot, lambda: {i.state for i in view.items} == {"queued"}, "the reload")
        last = posted.of(QueuesView.Listed)[-1]
        assert len(posted.of(QueuesView.Listed)) > listed
        assert {(i.id, i.state) for i in last.items} == {(queued.id, "queued"), (dead.id, "queued")}  # type: ignore[attr-defined]
        table.move_cursor(row=[i.id for i in view.items].index(queued.id))
        await pilot.pause()
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
        await until(
            pilot,
            lambda: app.screen.query_one("#confirm-yes").region.width > 0,
            "the button to be laid out",
        )
        assert await pilot.click("#confirm-yes")
        await until(pilot, lambda: len(posted.of(QueuesView.Changed)) == 2, "the purge")
        await until(pilot, lambda: [i.id for i in view.items] == [dead.id], "the reload")


@pytest.mark.slow
async def test_changes_refused_while_the_outbox_is_locked(
    outbox: tuple[Path, Entry, Entry],
) -> None:
    directory, queued, _ = outbox
    lock = OutboxLock(FsStorage(directory, create=False).lock_path)
    lock.acquire(0.0)
    try:
        app = fixed_app(outbox_dir=directory)
        posted = Posted()
        async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
            await pilot.pause()
            await pilot.press("6")
            view = app.query_one(QueuesView)
            await until(pilot, lambda: view.loads > 0, "the listing")
            table = app.query_one("#queue-table", QueueList)
            table.move_cursor(row=[i.id for i in view.items].index(queued.id))
            await pilot.pause()
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
            await pilot.press("y")
            await until(pilot, lambda: posted.of(QueuesView.Changed), "the refusal")
            assert posted.of(QueuesView.Changed)[-1].error  # type: ignore[attr-defined]
    finally:
        lock.release()
    assert queued.id in {i.id for i in list_outbox(directory)}


@pytest.mark.slow
async def test_queue_view_says_when_there_is_no_outbox(tmp_path: Path) -> None:
    app = fixed_app(outbox_dir=tmp_path / "not-an-outbox")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("6")
        view = app.query_one(QueuesView)
        await until(pilot, lambda: view.loads > 0, "the listing")
        assert view.error and view.items == []


def table_ids(app: Any) -> list[str]:
    return app.query_one("#queue-table", QueueList).ids  # type: ignore[no-any-return]


@pytest.mark.slow
async def test_a_new_listing_keeps_the_cursor_on_its_entry(tmp_path: Path) -> None:
    """Entries leaving the outbox leave the list, the cursor stays on its entry (not on
    its row number); the listings come as messages, the latest shown."""
    directory = tmp_path / "outbox"
    storage = FsStorage(directory)
    entries = [add(storage, n) for n in range(1, 5)]
    ids = [i.id for i in list_outbox(directory)]
    app = fixed_app(outbox_dir=directory)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("6")
        view = app.query_one(QueuesView)
        await until(pilot, lambda: view.loads > 0, "the listing")
        assert table_ids(app) == ids
        assert [i.id for i in posted.of(QueuesView.Listed)[-1].items] == ids  # type: ignore[attr-defined]
        table = app.query_one("#queue-table", QueueList)
        table.move_cursor(row=2)
        await pilot.pause()
        assert view.selected() is not None and view.selected().id == ids[2]  # type: ignore[union-attr]
        # Another process sends (here: purges) the first two entries.
        assert queues.purge(directory, ids[:2]) == ids[:2]
        loads = view.loads
        view.reload()
        await until(pilot, lambda: view.loads > loads, "the next listing")
        assert table_ids(app) == ids[2:]
        assert view.selected() is not None and view.selected().id == ids[2]  # type: ignore[union-attr]
        assert {e.id for e in entries} >= set(ids)


@pytest.mark.slow
async def test_stale_listing_is_not_shown(outbox: tuple[Path, Entry, Entry]) -> None:
    directory, queued, dead = outbox
    app = fixed_app(outbox_dir=directory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("6")
        view = app.query_one(QueuesView)
        await until(pilot, lambda: view.loads > 0, "the listing")
        loads = view.loads
        # A listing asked for before the one shown arrives late: it is dropped.
        view.post_message(QueuesView.Listed(0, [], [], "late"))
        view.reload()
        await until(pilot, lambda: view.loads > loads, "the next listing")
        assert view.error == "" and {i.id for i in view.items} == {queued.id, dead.id}


@pytest.mark.slow
async def test_outbox_calls_never_run_on_the_ui_thread(
    outbox: tuple[Path, Entry, Entry], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing, retry and purge touch the file system: each runs in a worker, so that
    no key (the view's switch, r, d, the confirmation) waits for it."""
    directory, queued, dead = outbox
    threads: list[tuple[str, int]] = []

    def recorded(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            threads.append((name, threading.get_ident()))
            return call(*args, **kwargs)

        return wrapper

    for name in ("load", "retry", "purge"):
        monkeypatch.setattr(queues, name, recorded(name, getattr(queues, name)))
    app = fixed_app(outbox_dir=directory)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        ui_thread = threading.get_ident()
        await pilot.pause()
        await pilot.press("6")
        view = app.query_one(QueuesView)
        await until(pilot, lambda: view.loads > 0, "the listing")
        table = app.query_one("#queue-table", QueueList)
        for verb, key, entry in (("retry", "r", dead), ("purge", "d", queued)):
            table.move_cursor(row=[i.id for i in view.items].index(entry.id))
            await pilot.pause()
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, Confirm), "the confirmation")
            await pilot.press("y")
            await until(
                pilot,
                lambda v=verb: any(c.verb == v for c in posted.of(QueuesView.Changed)),  # type: ignore[attr-defined]
                f"the {verb}",
            )
        await until(pilot, lambda: [i.id for i in view.items] == [dead.id], "the last listing")
    assert {name for name, _ in threads} == {"load", "retry", "purge"}
    assert all(ident != ui_thread for _, ident in threads), threads


async def test_queue_list_draws_untrusted_cells_literally_and_moves_with_keys() -> None:
    from mailbus.outbox.listing import QueueItem
    from mailbus_workbench.views.queues import cells
    from textual.app import App, ComposeResult

    hostile = "[/x] [bold]job\x1b[31m\x07 " + "long " * 20
    items = [
        QueueItem(f"{n:08d}-id", "dead" if n == 3 else "queued", f"r{n}@y.org", n, 0, 5.0, 100)
        for n in range(1, 6)
    ]
    items[0] = QueueItem("00000001-id", "queued", "r1@y.org", 0, 0, 5.0, 100, subject=hostile)
    rows = {item.id: cells(item, 1) for item in items}
    assert all(cell.isprintable() for row in rows.values() for cell in row)

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield QueueList(id="queue-table")

    app = One()
    posted = Posted()
    async with app.run_test(size=(130, 10), message_hook=posted.hook) as pilot:
        listing = app.query_one(QueueList)
        listing.show(rows)
        listing.focus()
        await pilot.pause()
        first = listing.render_line(1).text
        assert "[/x] [bold]job" in first and "…" in first  # literal, cut, not wrapped
        assert listing.selected_id() == "00000001-id"
        await pilot.press("down", "down")
        assert listing.selected_id() == "00000003-id"
        assert [m.entry_id for m in posted.of(QueueList.Highlighted)][-1] == "00000003-id"  # type: ignore[attr-defined]
        await pilot.press("end")
        assert listing.selected_id() == "00000005-id"
        # Entries above the cursor leave: it stays on its entry.
        listing.show({k: v for k, v in rows.items() if k not in ("00000001-id", "00000002-id")})
        assert listing.selected_id() == "00000005-id" and listing.cursor_row == 2
        # Its own entry leaves: it stays on its row number (clamped).
        listing.show({k: v for k, v in rows.items() if k in ("00000001-id",)})
        assert listing.selected_id() == "00000001-id"

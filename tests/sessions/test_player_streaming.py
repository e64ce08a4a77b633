"""The streaming player against the global `replay_events` it replaces: the same emails,
order, links and raw bytes on every sample session and on generated ones (sorted parts of
many row groups, and an unsorted part as sessions were written before); what it holds
bounded by its read-ahead; seeks landing on the right email; the window read through
the index; a part that breaks during a replay."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import mailbus
import pytest
from mailbus.sessions.index import INDEX_FILE, load_index
from mailbus.sessions.player import Player, ReplayEvent, replay_events
from mailbus.sessions.replay_options import offset_ns
from mailbus.trace import TraceEvent
from sessions_helpers import SAMPLE_NAMES, SAMPLES
from waiting import eventually

from bench.sessions import synthetic_session
from bench.synthetic_sorted import write_synthetic


@pytest.fixture(scope="module")
def sorted_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40,000 events in 5 time-sorted parts of row groups of 2,048 rows."""
    path = tmp_path_factory.mktemp("stream") / "sorted"
    write_synthetic(path, 40_000, part_rows=8_000, group_rows=2_048)
    load_index(path)
    return path


@pytest.fixture(scope="module")
def unsorted_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100,000 events as bench.sessions writes them: one part, one row group, rows by
    kind rather than by time (a session recorded before parts were sorted)."""
    path = tmp_path_factory.mktemp("stream") / "unsorted"
    synthetic_session(path, 100_000)
    return path


def _sent(player: Player, ctx: mailbus.Context) -> list[tuple[Any, ...]]:
    """Play at full speed; each sent email as (name, Replay-Of, In-Reply-To and
    References mapped back to recorded IDs where they name a replayed email)."""
    sent: list[TraceEvent] = []
    ctx.tracer.add_listener(lambda e: sent.append(e) if e.kind == "replay.sent" else None)
    player.start()
    assert player.wait(120)
    original = {e.message_id: e.extra["original"] for e in sent}
    return [
        (
            e.name,
            e.extra["original"],
            original.get(e.in_reply_to, e.in_reply_to),
            tuple(original.get(r, r) for r in e.references),
            e.raw,
        )
        for e in sent
    ]


def _expected(events: list[ReplayEvent]) -> list[tuple[Any, ...]]:
    return [(e.name, e.message_id, e.in_reply_to, e.references, e.raw) for e in events]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_a_sample_replays_as_the_global_player_did(name: str) -> None:
    old = replay_events(SAMPLES / name)
    with mailbus.Context() as ctx:
        player = Player(SAMPLES / name, ctx, rate=1e6, read_ahead=7, id_map_size=50)
        assert player.events == old
        assert player.total == len(old)
        sent = _sent(player, ctx)
    assert sent == _expected(old)
    assert player.sent == len(old) and player.read_ahead_high_water <= 7
    assert any(e.in_reply_to for e in old) or name != "slow_service"
    assert any(e.raw for e in old) == any(s[-1] for s in sent)


@pytest.mark.slow
def test_sorted_parts_replay_as_the_global_player_did_holding_little(
    sorted_session: Path,
) -> None:
    old = replay_events(sorted_session)
    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, rate=1e6, read_ahead=100, id_map_size=1_000)
        sent = _sent(player, ctx)
    assert sent == _expected(old)
    assert player.total == player.sent == len(old) == 29_960
    # What it held: its read-ahead, and the rows of two row groups at most.
    assert player.read_ahead_high_water <= 100
    assert player.reader.pending_high_water <= 2 * 2_048
    linked = [s for s in sent if s[2]]
    assert len(linked) > 1_000  # responses name their requests' replayed IDs


@pytest.mark.slow
def test_an_unsorted_session_replays_as_the_global_player_did(unsorted_session: Path) -> None:
    old = replay_events(unsorted_session)
    with mailbus.Context() as ctx:
        player = Player(unsorted_session, ctx)
        assert list(player.stream(player.origin_ns)) == old
        assert player.total == len(old)
        assert player.index.notes == ("no index: built it (1 part(s))",)
    assert (unsorted_session / INDEX_FILE).exists()


def test_a_window_reads_only_its_row_groups_and_sends_its_emails(sorted_session: Path) -> None:
    old = replay_events(sorted_session)
    start_s, stop_s = 0.5, 0.6
    expected = [e for e in old if 0.5e9 <= e.offset_ns <= 0.6e9]
    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, start_s=start_s, stop_s=stop_s, rate=1e6)
        assert player.total == len(expected) > 0
        groups = len(player.index.row_groups)
        sent = _sent(player, ctx)
    assert sent == _expected(expected)
    assert player.reader.groups_read <= 2 * 2  # two row groups, two column sets each
    assert groups == 20
    # Name filters push down to the rows read, and the emails match the global player's.
    with mailbus.Context() as ctx:
        only = Player(sorted_session, ctx, include="^svc1$", services=True)
        assert only.events == [e for e in replay_events(sorted_session, include="^svc1$")]


def test_seeks_land_on_the_first_email_at_or_after_the_time(sorted_session: Path) -> None:
    old = replay_events(sorted_session)
    # The last: stepping to the last email ends the replay (as it always did).
    targets = [0.0, 0.2501, 0.77, 1.3, 0.0123, (old[-1].offset_ns - 1_000) / 1e9]
    got: list[ReplayEvent] = []
    arrived = threading.Semaphore(0)

    def on_sent(_: Player, event: ReplayEvent) -> None:
        got.append(event)
        arrived.release()

    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, on_sent=on_sent, read_ahead=10).start(paused=True)
        for target in targets:
            player.seek(target)
            player.step()
            assert arrived.acquire(timeout=30), (target, len(got), player.state, player.read_error)
            want = next(e for e in old if e.offset_ns >= int(target * 1e9))
            assert got[-1] == want, target
            assert player.read_ahead_high_water <= 10
        assert player.wait(30)
        assert player.state == "finished"
    assert len(got) == len(targets)
    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, on_sent=on_sent).start(paused=True)
        player.seek(1e6)  # past the end: the end
        assert player.position_s == pytest.approx(old[-1].offset_ns / 1e9)
        player.resume()
        assert player.wait(30)
        assert player.state == "finished"
    assert len(got) == len(targets)  # nothing sent past the end


def test_loop_streams_each_pass_again(sorted_session: Path) -> None:
    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, rate=1e6, start_s=1.0, stop_s=1.02, loop=True)
        total = player.total
        player.start()
        eventually(lambda: player.loops >= 2)
        player.stop()
    assert total > 0 and player.sent >= 2 * total


def test_a_part_broken_during_a_replay_ends_it_and_says_why(
    sorted_session: Path, tmp_path: Path
) -> None:
    import shutil

    path = tmp_path / "s"
    shutil.copytree(sorted_session, path)
    with mailbus.Context() as ctx:
        player = Player(path, ctx, rate=1e6, read_ahead=5)
        part = path / "part-00004.parquet"
        original = part.read_bytes()
        part.write_bytes(original[: len(original) // 3])  # cut after the index was read
        player.start()
        assert player.wait(60)
    assert player.read_error is not None and "part-00004" in player.read_error
    assert 0 < player.sent < player.total
    assert player.state == "finished"


def test_wait_landed_returns_once_the_seek_has_its_first_email(sorted_session: Path) -> None:
    old = replay_events(sorted_session)
    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx)
        assert player.wait_landed(0.0)  # nothing asked for yet: nothing to wait for
        player.start(paused=True)
        for target in (0.77, 0.0123):
            player.seek(target)
            assert player.wait_landed(30), (target, player.read_error)
            assert player.buffered > 0  # the email at the new place is read
            want = next(e for e in old if e.offset_ns >= int(target * 1e9))
            assert player.position_s == want.offset_ns / 1e9
        player.seek(1e6)  # past the end: lands with nothing more to read
        assert player.wait_landed(30)
        assert player.buffered == 0 and player.position_s == old[-1].offset_ns / 1e9
        player.stop()
        assert player.wait_landed(0.0)  # stopped: nothing more will land


@pytest.fixture(scope="module")
def wide_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30,000 events in 2 parts of row groups of 8,192 rows: larger than the first
    frame a start or seek works through before the rest of its row group."""
    path = tmp_path_factory.mktemp("stream") / "wide"
    write_synthetic(path, 30_000, part_rows=15_000, group_rows=8_192)
    load_index(path)
    return path


def test_starting_inside_a_large_row_group_sends_what_the_global_player_sends(
    wide_groups: Path,
) -> None:
    old = replay_events(wide_groups)
    with mailbus.Context() as ctx:
        whole = Player(wide_groups, ctx)
        assert list(whole.stream(whole.origin_ns)) == old
        for start_s in (0.0001, 0.25, 0.5003, 1.1):
            player = Player(wide_groups, ctx, start_s=start_s, stop_s=start_s + 0.5)
            expected = [e for e in old if start_s * 1e9 <= e.offset_ns <= (start_s + 0.5) * 1e9]
            assert player.events == expected and len(expected) > 3_000, start_s


def _seek_and_step(player: Player, arrived: threading.Semaphore, offset_s: float) -> None:
    player.seek(offset_s)
    player.step()
    assert arrived.acquire(timeout=30), (offset_s, player.state, player.read_error)


def test_seeks_to_row_group_boundaries_land_on_the_email_there(sorted_session: Path) -> None:
    old = replay_events(sorted_session)
    got: list[ReplayEvent] = []
    arrived = threading.Semaphore(0)

    def on_sent(_: Player, event: ReplayEvent) -> None:
        got.append(event)
        arrived.release()

    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, on_sent=on_sent, read_ahead=5).start(paused=True)
        origin = player.origin_ns
        groups = player.index.groups_in_time_order()
        assert len(groups) == 20
        # Each group's first and last time, and a nanosecond either side of them.
        times = sorted(
            {
                t + d
                for g in groups[1:]
                for t in (g.first_ns or 0, g.last_ns or 0)
                for d in (-1, 0, 1)
                if t + d >= origin and t + d <= old[-2].source_ns
            }
        )
        for time_ns in times:
            offset_s = (time_ns - origin) / 1e9
            _seek_and_step(player, arrived, offset_s)
            t = origin + offset_ns(offset_s)  # the time the seek asked for, in whole ns
            want = next(e for e in old if e.source_ns >= t)
            assert got[-1] == want, (t, groups)
            # The estimate of emails skipped: the index's whole bins before the time.
            width = player.index.width_ns
            skipped = sum(
                n
                for name in player.names
                for b, n in player.index.names[name].histogram.items()
                if (b + 1) * width <= t
            )
            assert player.pass_position == skipped + 1
        assert player.read_ahead_high_water <= 5
        player.stop()


def test_seeks_before_a_window_and_past_its_end(sorted_session: Path) -> None:
    old = replay_events(sorted_session)
    window = [e for e in old if 0.5e9 <= e.offset_ns <= 0.7e9]
    got: list[ReplayEvent] = []
    arrived = threading.Semaphore(0)

    def on_sent(_: Player, event: ReplayEvent) -> None:
        got.append(event)
        arrived.release()

    with mailbus.Context() as ctx:
        player = Player(sorted_session, ctx, start_s=0.5, stop_s=0.7, on_sent=on_sent)
        player.start(paused=True)
        _seek_and_step(player, arrived, 0.0)  # before the window: its first email
        assert got == window[:1] and player.pass_position == 1
        _seek_and_step(player, arrived, 0.6)
        assert got[-1] == next(e for e in window if e.offset_ns >= 0.6e9)
        with pytest.raises(ValueError, match="seek offset"):
            player.seek(-1.0)
        player.seek(0.9)  # past the window's end: its end, nothing more to send
        assert player.position_s == pytest.approx(window[-1].offset_ns / 1e9)
        player.resume()
        assert player.wait(30) and player.state == "finished"
    assert len(got) == 2


def test_the_reader_keeps_a_bounded_number_of_parts_open(sorted_session: Path) -> None:
    from mailbus.sessions.pages import RowGroupReader, time_ordered

    index = load_index(sorted_session)
    reader = RowGroupReader(index, open_parts=2)
    rows = 0
    for frame in time_ordered(reader, 0, None, ["message_id"]):
        rows += frame.height
        assert reader.open_files <= 2
    assert rows == index.rows == 40_000
    assert reader.files_opened == len(index.parts) == 5
    assert reader.pending_high_water <= 2 * 2_048

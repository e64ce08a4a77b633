"""Replay: recorded timing, linked threads, control (pause/step/seek/loop), window,
filter and remapping; service mocking answering a live client."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import mailbus
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mailbus import headers as H
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.sessions import analysis
from mailbus.sessions.mock import ServiceMock
from mailbus.sessions.player import REPLAY_OF, Player, ReplayEvent
from mailbus.sessions.reader import open_session
from mailbus.sessions.recorder import Recorder
from mailbus.sessions.replay_options import parse_remap
from mailbus.trace import TraceEvent
from sessions_helpers import SAMPLES, T, write_session
from waiting import eventually

# Replayed emails must leave within this much of their scheduled offset. Generous: the
# machine is shared; the player itself aims at well under a millisecond.
TOLERANCE_S = 0.25


def _messages(offsets_s: list[float], topic: str = "t") -> list[TraceEvent]:
    return [
        TraceEvent(
            "message.published",
            T + int(o * 1e9),
            name=topic,
            gid="P",
            source_gid="P",
            sequence_number=i + 1,
            message_id=f"<m{i}@t>",
            source_timestamp_ns=T + int(o * 1e9),
            body=f"body {i}",
            size=6,
            headers={"Publisher-GID": "P", "Unit": "m"},
        )
        for i, o in enumerate(offsets_s)
    ]


def _count_received(ctx: mailbus.Context) -> list[TraceEvent]:
    """Receptions, seen after the recorder (added earlier) has queued them."""
    seen: list[TraceEvent] = []
    ctx.tracer.add_listener(lambda e: seen.append(e) if e.kind == "email.received" else None)
    return seen


@pytest.mark.slow
def test_replay_reproduces_recorded_offsets_scaled_by_rate(tmp_path: Path) -> None:
    offsets = [0.0, 0.2, 0.5, 0.9, 1.2]
    session = write_session(tmp_path / "s", _messages(offsets))
    with mailbus.Context() as ctx:
        recorder = Recorder(tmp_path / "replayed", context=ctx)
        received = _count_received(ctx)
        player = Player(session, ctx, rate=2.0).start()
        assert player.wait(30)
        # The polling thread records the receptions; wait until they are all queued.
        eventually(lambda: len(received) >= len(offsets))
        recorder.stop()
    frame = (
        open_session(tmp_path / "replayed")
        .read()
        .filter(pl.col("kind") == "email.received")
        .sort("source_ns")
    )
    assert frame["body"].to_list() == [f"body {i}".encode() for i in range(len(offsets))]
    sent = frame["source_ns"].to_list()
    actual = [(s - sent[0]) / 1e9 for s in sent]
    for got, want in zip(actual, offsets, strict=True):
        assert abs(got - want / 2) <= TOLERANCE_S, (actual, offsets)
    # User headers survive, engine headers are rebuilt, the original is named.
    headers = frame["headers"][0]
    assert headers["Unit"] == "m" and headers[REPLAY_OF] == "<m0@t>"
    assert headers["Publisher-GID"] != "P" and headers["Publisher-Sequence-Number"] == "1"
    assert frame["message_id"][0] != "<m0@t>"


def test_replayed_threads_stay_linked(tmp_path: Path) -> None:
    """Replay the slow-service sample: every replayed response names the new Message-ID
    of its replayed request, and the service analysis of the replay finds the same
    requests, orphans and duplicates as the original."""
    original = SAMPLES / "slow_service"
    with mailbus.Context() as ctx:
        recorder = Recorder(tmp_path / "replayed", context=ctx)
        received_events = _count_received(ctx)
        player = Player(original, ctx, rate=50.0).start()
        assert player.wait(60)
        eventually(lambda: len(received_events) >= player.sent)
        recorder.stop()
    frame = open_session(tmp_path / "replayed").read()
    received = frame.filter(pl.col("kind") == "email.received").with_columns(
        pl.col("headers").map_elements(lambda h: h[REPLAY_OF], return_dtype=pl.String).alias("of")
    )
    new_id = dict(zip(received["of"], received["message_id"], strict=True))
    responses = received.filter(pl.col("detail") == "response")
    assert responses.height > 10
    source = open_session(original).read()
    replied_to = dict(
        source.filter(pl.col("kind").is_in(["response.sent", "email.received"]))
        .filter(pl.col("in_reply_to").is_not_null())
        .select("message_id", "in_reply_to")
        .iter_rows()
    )
    for row in responses.iter_rows(named=True):
        assert row["in_reply_to"] == new_id[replied_to[row["of"]]]
        assert row["references"][-1] == row["in_reply_to"]
    keep = ["service", "requests", "orphans", "duplicate_responses"]
    before = analysis.service_stats([original]).select(keep)
    after = analysis.service_stats([tmp_path / "replayed"]).select(keep)
    assert before.equals(after), (before, after)


def test_pause_step_seek_resume(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s", _messages([i / 10 for i in range(10)]))
    seen: list[ReplayEvent] = []
    stepped = threading.Event()
    with mailbus.Context() as ctx:
        player = Player(session, ctx, on_sent=lambda p, e: (seen.append(e), stepped.set()))
        assert player.state == "ready" and player.total == 10
        player.start(paused=True)
        assert player.state == "paused"
        for n in range(1, 4):
            player.step()
            eventually(lambda n=n: len(seen) == n)
        player.seek(0.7)
        assert player.position_s == pytest.approx(0.7)
        player.step()
        eventually(lambda: len(seen) == 4)
        player.resume()
        assert player.wait(10)
        assert player.state == "finished"
    assert [round(e.offset_ns / 1e9, 1) for e in seen] == [0.0, 0.1, 0.2, 0.7, 0.8, 0.9]


def test_loop_gives_new_message_ids_each_pass(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s", _messages([0.0, 0.01, 0.02]))
    sent: list[str] = []
    with mailbus.Context() as ctx:
        ctx.tracer.add_listener(
            lambda e: sent.append(e.message_id) if e.kind == "replay.sent" else None
        )
        player = Player(session, ctx, rate=10.0, loop=True).start()
        eventually(lambda: player.loops >= 2)
        player.stop()
        assert player.state == "stopped"
    assert len(sent) >= 6 and len(set(sent)) == len(sent)


def test_window_filter_and_remap(tmp_path: Path) -> None:
    events = _messages([0.0, 0.1, 0.2, 0.3, 0.4], "a") + _messages([0.05, 0.25], "b")
    session = write_session(tmp_path / "s", events)
    with mailbus.Context() as ctx:
        sub = ctx.subscription("renamed/a")
        player = Player(
            session, ctx, start_s=0.1, stop_s=0.3, include="^a$", remap={"a": "renamed/a"}
        )
        assert [round(e.offset_ns / 1e9, 2) for e in player.events] == [0.1, 0.2, 0.3]
        player.start()
        assert player.wait(10)
        got = [mailbus.wait_for_message(sub, 5.0) for _ in range(3)]
    assert [m.body for m in got if m] == ["body 1", "body 2", "body 3"]
    with pytest.raises(ValueError, match="OLD=NEW"):
        parse_remap(["nonsense"])
    with pytest.raises(mailbus.InvalidNameError):
        parse_remap(["a=bad\nname"])
    with pytest.raises(ValueError, match="rate"):
        Player(session, mailbus.Context(), rate=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start_s": float("inf")}, "start_s must be a finite"),
        ({"stop_s": float("inf")}, "stop_s must be a finite"),
        ({"start_s": float("nan")}, "start_s must be a finite"),
        ({"start_s": -1.0}, "start_s must be a finite"),
        ({"start_s": 2.0, "stop_s": 1.0}, "start_s <= stop_s"),
        ({"rate": float("inf")}, "rate must be a positive finite"),
        ({"rate": float("nan")}, "rate must be a positive finite"),
        ({"include": "["}, "bad include filter '\\['"),
        ({"exclude": "(a"}, "bad exclude filter"),
    ],
)
def test_player_refuses_bad_windows_rates_and_filters(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    session = write_session(tmp_path / "s", _messages([0.0, 0.1]))
    with mailbus.Context() as ctx, pytest.raises(ValueError, match=message):
        Player(session, ctx, **kwargs)  # type: ignore[arg-type]


def test_seek_refuses_what_is_not_a_finite_offset_and_clamps_far_ones(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s", _messages([0.0, 0.1, 0.2]))
    with mailbus.Context() as ctx:
        player = Player(session, ctx)
        for bad in (float("inf"), float("-inf"), float("nan"), -0.5):
            with pytest.raises(ValueError, match="seek offset must be a finite number"):
                player.seek(bad)
        assert player.position_s == 0.0  # a refused seek moves nothing
        player.seek(1e300)  # finite but beyond int64 nanoseconds: the end
        assert player.position_s == pytest.approx(0.2)
        assert player.total == 3
        # A window reaching far past the end keeps every email.
        assert Player(session, ctx, start_s=0.0, stop_s=1e300).total == 3
        assert Player(session, ctx, start_s=1e300).total == 0


def _record_doubler(path: Path) -> None:
    with mailbus.Context() as ctx:
        recorder = Recorder(path, context=ctx)
        server, client = ctx.server("math/double"), ctx.client("math/double")
        stop = threading.Event()

        def serve() -> None:
            while not stop.is_set():
                request = mailbus.wait_for_request(server, 0.1)
                if request is not None:
                    server.send_response(request, str(2 * int(request.body.strip("[]"))))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        for n in (1, 2, 3):
            assert client.call(f"[{n}]", timeout=5).body == str(2 * n)
        stop.set()
        thread.join(5)
        recorder.stop()


def test_service_mock_answers_a_live_client(tmp_path: Path) -> None:
    _record_doubler(tmp_path / "s")
    with mailbus.Context() as ctx:
        with ServiceMock(tmp_path / "s", ctx, "math/double") as mock:
            client = ctx.client("math/double")
            assert client.call("[2]", timeout=5).body == "4"  # matched by body
            assert client.call("[3]", timeout=5).body == "6"
            assert client.call("[42]", timeout=5).body == "2"  # unknown: in order
            assert client.call("[43]", timeout=5).body == "4"
        assert (mock.by_body, mock.in_order, mock.answered) == (2, 2, 4)
        with pytest.raises(ValueError, match="no answered request"):
            ServiceMock(tmp_path / "s", ctx, "math/other")


def test_replayed_emails_keep_their_recorded_time_under_a_prefix(tmp_path: Path) -> None:
    """Replay-Source-Timestamp carries the recorded Source-Timestamp (Source-Timestamp is
    the replay's own time); with a prefix every name is replayed under it."""
    offsets = [0.0, 0.5]
    session = write_session(tmp_path / "s", _messages(offsets, topic="lab/t"))
    with mailbus.Context() as ctx:
        before = time.time_ns()
        player = Player(session, ctx, prefix="replay/")
        emails = [player.build_email(event) for event in player.events]
        plain = Player(session, ctx).build_email(player.events[0])
        for bad in (" replay/", "re\nplay/"):
            with pytest.raises(ValueError, match="replay prefix"):
                Player(session, ctx, prefix=bad)
        with pytest.raises(ValueError, match="Replay-Source-Timestamp"):
            ctx.publisher("lab/t").publish("forged", headers={"Replay-Source-Timestamp": "1"})
    assert [e.subject for e in emails] == ["replay/lab/t", "replay/lab/t"]
    assert plain.subject == "lab/t"
    recorded = [T + int(o * 1e9) for o in offsets]
    assert [int(e.headers[H.REPLAY_SOURCE_TIMESTAMP]) for e in emails] == recorded
    assert all(int(e.headers[H.SOURCE_TIMESTAMP]) >= before for e in emails)


def test_participants_announcements_are_not_replayed(tmp_path: Path) -> None:
    # A replayed announcement would list a recorded (gone) process as alive.
    announcement = dataclasses.replace(
        _messages([0.05], PARTICIPANTS_TOPIC)[0], message_id="<announce@t>"
    )
    events = [*_messages([0.0, 0.1], "t"), announcement]
    session = write_session(tmp_path / "s", events)
    with mailbus.Context() as ctx:
        player = Player(session, ctx)
        assert [e.name for e in player.events] == ["t", "t"]
        assert Player(session, ctx, include="participants").events == []


def test_recorded_fields_are_checked_though_the_player_vouches_for_its_own(
    tmp_path: Path,
) -> None:
    """The player skips validating what it built itself, never what the recording
    holds: a Message-ID, a reply link or a user header that would inject header lines
    is refused for that email (counted, logged), and the emails around it go out."""
    events = _messages([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    events[1] = dataclasses.replace(events[1], message_id="<m1@t>\r\nBcc: spy@x")
    events[2] = dataclasses.replace(events[2], in_reply_to="<m0@t>\r\nBcc: spy@x")
    events[3] = dataclasses.replace(
        events[3], headers={"Publisher-GID": "P", "Unit": "m\r\nBcc: spy@x"}
    )
    events[4] = dataclasses.replace(events[4], references=("<m0@t>", "not an id"))
    session = write_session(tmp_path / "s", events)
    with mailbus.Context() as ctx:
        sub = ctx.subscription("t")
        player = Player(session, ctx, rate=1e9)
        player.run()
        assert player.errors == 4
        assert player.sent == 2
        got = [mailbus.wait_for_message(sub, 5.0) for _ in range(2)]
        assert mailbus.wait_for_message(sub, 0.2) is None
    assert [m.body for m in got if m] == ["body 0", "body 5"]
    assert all("spy@x" not in str(m.email.headers) for m in got if m)


def test_a_null_among_a_recorded_emails_references_is_refused(tmp_path: Path) -> None:
    """A Parquet file written elsewhere can hold a null inside References: that email is
    refused (the reader's identifier check does not pass it), the others go out."""
    session = write_session(tmp_path / "s", _messages([0.0, 0.1, 0.2]))
    (part,) = session.glob("*.parquet")
    table = pq.read_table(part)
    rows = [i for i, m in enumerate(table.column("message_id").to_pylist()) if m]
    references = table.column("references").to_pylist()
    references[rows[1]] = ["<m0@t>", None]
    column = table.schema.get_field_index("references")
    field = table.schema.field(column)
    pq.write_table(table.set_column(column, field, pa.array(references, field.type)), part)
    for index in session.glob("index*.json"):
        index.unlink()
    with mailbus.Context() as ctx:
        sub = ctx.subscription("t")
        player = Player(session, ctx, rate=1e9)
        player.run()
        assert (player.errors, player.sent) == (1, 2)
        got = [mailbus.wait_for_message(sub, 5.0) for _ in range(2)]
    assert [m.body for m in got if m] == ["body 0", "body 2"]

"""The copy-choice rule on frames of rows (replay_rows), the Message-IDs it remembers
across frames, and the identifier rule the player runs in polars."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.email_message import PLAIN_ID_MAX, plain_id
from mailbus.sessions.player import plain_ids
from mailbus.sessions.replay_rows import SeenHashes, SeenIds, choose_copies, email_rows


def _rows(*rows: tuple[int, str, int | None, int, str, str | None]) -> pl.DataFrame:
    """Rows of (event_index, kind, source_ns, recorded_ns, message_id, detail)."""
    return pl.DataFrame(
        {
            "event_index": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "source_ns": [r[2] for r in rows],
            "recorded_ns": [r[3] for r in rows],
            "name": ["robot/pose"] * len(rows),
            "message_id": [r[4] for r in rows],
            "detail": [r[5] for r in rows],
        },
        schema_overrides={"source_ns": pl.Int64, "detail": pl.String},
    )


def _chosen(
    frame: pl.DataFrame, seen: SeenIds | SeenHashes, *, cut: bool = True
) -> list[tuple[int, str]]:
    chosen = choose_copies(email_rows(frame), seen, cut_between_times=cut)
    return list(zip(chosen["event_index"].to_list(), chosen["message_id"].to_list(), strict=True))


def test_the_senders_event_is_chosen_over_received_copies_in_one_frame() -> None:
    frame = _rows(
        (1, "email.received", 100, 105, "<a@x>", "message"),
        (2, "message.published", 100, 101, "<a@x>", None),
        (3, "email.received", 100, 107, "<a@x>", "message"),
        (4, "email.received", 200, 206, "<b@x>", "message"),
        (5, "email.received", 200, 204, "<b@x>", "message"),
    )
    assert _chosen(frame, SeenIds()) == [(2, "<a@x>"), (4, "<b@x>")]


def test_a_copy_without_a_source_timestamp_in_a_later_frame_is_dropped() -> None:
    seen = SeenIds()
    first = _rows(
        (1, "email.received", None, 100, "<foreign@x>", "message"),
        (2, "email.received", 150, 151, "<own@x>", "message"),
    )
    later = _rows(
        (3, "email.received", None, 300, "<foreign@x>", "message"),  # another receiver
        (4, "email.received", None, 301, "<new@x>", "message"),
        (5, "email.received", 320, 321, "<own2@x>", "message"),
    )
    assert _chosen(first, seen) == [(1, "<foreign@x>"), (2, "<own@x>")]
    assert _chosen(later, seen) == [(4, "<new@x>"), (5, "<own2@x>")]
    # Only the copies that can straddle frames were remembered.
    assert len(seen) == 2


def test_without_frames_cut_between_times_every_chosen_id_is_checked() -> None:
    seen = SeenIds()
    first = _rows((1, "message.published", 100, 101, "<a@x>", None))
    later = _rows((2, "email.received", 100, 900, "<a@x>", "message"))
    assert _chosen(first, seen, cut=False) == [(1, "<a@x>")]
    assert _chosen(later, seen, cut=False) == []


def test_counting_by_hash_drops_a_later_copy_and_forgets_beyond_capacity() -> None:
    """The index counts with SeenHashes: a copy in a later batch is not counted again
    while its Message-ID's hash is remembered."""
    seen = SeenHashes(capacity=2)
    first = _rows(
        (1, "message.published", 100, 101, "<a@x>", None),
        (2, "message.published", 200, 201, "<b@x>", None),
    )
    later = _rows(
        (3, "email.received", 100, 900, "<a@x>", "message"),
        (4, "email.received", 300, 901, "<c@x>", "message"),
    )
    assert _chosen(first, seen, cut=False) == [(1, "<a@x>"), (2, "<b@x>")]
    assert _chosen(later, seen, cut=False) == [(4, "<c@x>")]
    assert len(seen) == 3  # at least the capacity: the first batch's two are kept
    assert _chosen(_rows((5, "email.received", 100, 950, "<a@x>", "message")), seen) == []
    newer = _rows(
        (6, "message.published", 400, 401, "<d@x>", None),
        (7, "message.published", 500, 501, "<e@x>", None),
    )
    assert len(_chosen(newer, seen, cut=False)) == 2
    assert len(seen) == 2  # the two older batches forgotten
    again = _rows((8, "email.received", 100, 990, "<a@x>", "message"))
    assert _chosen(again, seen, cut=False) == [(8, "<a@x>")]


def test_seen_ids_forget_the_oldest_frames_beyond_their_capacity() -> None:
    seen = SeenIds(capacity=4)
    seen.add(["<1>", "<2>", "<3>"])
    seen.add(["<4>", "<5>"])
    assert seen.unseen(["<1>", "<4>", "<9>"]) == [False, False, True]
    seen.add(["<6>", "<7>"])  # the first frame's three are forgotten together
    assert len(seen) == 4
    assert seen.unseen(["<1>", "<3>", "<4>", "<7>"]) == [True, True, False, False]
    seen.add([f"<{i}>" for i in range(10, 20)])  # more than the capacity: the latest
    assert len(seen) == 4
    assert seen.unseen(["<15>", "<16>", "<19>"]) == [True, False, False]


_ID_TEXT = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=127), max_size=30).map(
        lambda inner: f"<{inner}>"
    ),
    st.sampled_from(
        [
            "<a=?b@x>",
            "<a b@x>",
            "<a<b@x>",
            "<>",
            "<a@x>\n",
            "<ä@x>",
            "<" + "a" * (PLAIN_ID_MAX - 2) + ">",
            "<" + "a" * (PLAIN_ID_MAX - 1) + ">",
        ]
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ID_TEXT, min_size=1, max_size=20))
def test_the_polars_identifier_rule_is_plain_id(values: list[str]) -> None:
    frame = pl.DataFrame({"v": values}, schema={"v": pl.String})
    got = frame.select(plain_ids(pl.col("v"))).to_series().to_list()
    assert got == [plain_id(v) for v in values]

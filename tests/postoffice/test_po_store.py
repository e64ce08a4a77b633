"""The durable store: password hashing, file safety, group commit, listing."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from mailbus.postoffice.store import (
    HashParams,
    Store,
    StoreError,
    hash_digest,
    list_mailboxes,
    op_add_letter,
    op_create_box,
    op_delete_letters,
    op_empty_box,
    op_remove_box,
    password_digest,
    verify_digest,
)

CHEAP = HashParams(log2_n=8)


def test_password_hash_is_salted_slow_and_verifiable() -> None:
    digest = password_digest("correct horse")
    first, second = hash_digest(digest, CHEAP), hash_digest(digest, CHEAP)
    assert first != second  # salted
    assert first.startswith("scrypt$8$8$1$")
    assert digest.hex() not in first
    assert verify_digest(digest, first) and verify_digest(digest, second)
    assert not verify_digest(password_digest("wrong"), first)


@pytest.mark.parametrize(
    "stored", ["", "plain", "md5$1$2$3$4$5", "scrypt$x$8$1$AA==$AA==", "$$$$$"]
)
def test_malformed_stored_hashes_never_verify(stored: str) -> None:
    assert not verify_digest(bytes(16), stored)


def test_default_cost_is_scrypt_2_14() -> None:
    assert HashParams() == HashParams(log2_n=14, r=8, p=1)


def test_store_files_are_private(tmp_path: Path) -> None:
    store = Store(tmp_path / "new" / "po.db")
    try:
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "new" / "po.db").stat().st_mode) == 0o600
    finally:
        store.close()


def test_a_corrupt_file_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "po.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not a usable PostOffice store"):
        Store(path)
    assert path.read_bytes().startswith(b"this is not a database")  # left as it was


def test_operations_and_listing(tmp_path: Path) -> None:
    path = tmp_path / "po.db"
    store = Store(path)
    try:
        write = store.apply
        box_a = write(op_create_box("a.a", "secret"))
        box_b = write(op_create_box("a.b", "secret"))
        assert write(op_create_box("a.a", "other")) is None  # taken
        assert box_a is not None and box_b is not None
        ids = write(op_add_letter([box_a, box_b], "a.a", b"both"))
        assert len(ids) == 2 and all(ids)
        more = write(op_add_letter([box_b], "a.a", b"second"))
        counts = {s.name: (s.letters, s.payload_bytes) for s in list_mailboxes(path)}
        assert counts == {"a.a": (1, 4), "a.b": (2, 10)}
        assert store.summaries() == list_mailboxes(path)
        assert write(op_delete_letters([ids[1]])) == 1
        boxes, letters = store.load()
        assert [b.name for b in boxes] == ["a.a", "a.b"]
        assert letters[box_b] == more
        assert store.fetch(more[0]) == ("a.a", b"second")
        assert write(op_empty_box(box_b)) == 1
        assert write(op_remove_box(box_a)) is True
        assert write(op_remove_box(box_a)) is False
        assert write(op_add_letter([box_a], "a.b", b"late")) == [None]
        assert [s.name for s in list_mailboxes(path)] == ["a.b"]
    finally:
        store.close()


def test_a_failing_operation_rolls_back_its_whole_batch(tmp_path: Path) -> None:
    store = Store(tmp_path / "po.db")
    try:

        def broken(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO no_such_table VALUES (1)")

        with pytest.raises(StoreError):
            store.run_batch([op_create_box("x.y", "s"), broken])
        assert [b.name for b in store.load()[0]] == []  # the create was rolled back too
        assert store.apply(op_create_box("x.z", "s")) is not None
    finally:
        store.close()


def test_list_mailboxes_of_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no PostOffice store"):
        list_mailboxes(tmp_path / "absent.db")


def test_sync_mode_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Store(tmp_path / "po.db", sync="sometimes")  # type: ignore[arg-type]


def test_one_daemon_per_store(tmp_path: Path) -> None:
    first = Store(tmp_path / "po.db")
    try:
        with pytest.raises(StoreError, match="in use by another PostOffice daemon"):
            Store(tmp_path / "po.db")
    finally:
        first.close()
    Store(tmp_path / "po.db").close()  # free again once the first is closed

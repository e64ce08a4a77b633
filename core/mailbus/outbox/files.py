"""Durable file primitives for the outbox: create, write, replace and fsync (several
files' fsyncs at once), with the errors of a full disk told apart."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeAlias

from mailbus.outbox.storage import (
    ReadOnlyStorageError,
    RetryLaterError,
    StorageFullError,
)

StrPath: TypeAlias = "str | os.PathLike[str]"
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

DIR_MODE = 0o700


FILE_MODE = 0o600


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def storage_error(exc: OSError, what: str) -> RetryLaterError:
    """The outbox error for an OSError: disk full and a read-only file system get
    their own, clear one-line errors."""
    if exc.errno in _FULL_ERRNOS:
        return StorageFullError(f"outbox full: cannot {what}: {exc.strerror} ({exc.filename})")
    if exc.errno == errno.EROFS:
        return ReadOnlyStorageError(
            f"outbox: cannot {what}: {exc.filename or 'its file system'} is read-only; "
            "remount it read-write (after fsck if the kernel made it read-only after an "
            "error: what the journal holds is restored at the next start)"
        )
    return RetryLaterError(f"outbox: cannot {what}: {exc}")


def _forget_pool() -> None:
    # A forked child has none of the parent's threads: start a pool of its own.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


def _fsync_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="outbox-fsync")
        return _pool


def fsync_together(fds: Sequence[int]) -> None:
    """fsync every descriptor, concurrently, and return when all are durable (raise the
    first error). Concurrent fsyncs let a journalling file system commit them in one
    transaction and one cache flush (group commit) instead of one each."""
    if not fds:
        return
    try:
        futures = [_fsync_pool().submit(os.fsync, fd) for fd in fds[1:]]
    except RuntimeError:
        # The interpreter is shutting down and takes no new threads: one at a time.
        for fd in fds:
            os.fsync(fd)
        return
    error: OSError | None = None
    try:
        os.fsync(fds[0])
    except OSError as exc:
        error = exc
    for future in futures:
        try:
            future.result()
        except OSError as exc:
            error = error or exc
    if error is not None:
        raise error


def open_dir(path: StrPath) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def fsync_dirs(*paths: StrPath) -> None:
    fds: list[int] = []
    try:
        for path in paths:
            fds.append(open_dir(path))
        fsync_together(fds)
    finally:
        for fd in fds:
            os.close(fd)


def fsync_dir(path: StrPath) -> None:
    fsync_dirs(path)


# The umask can only narrow these modes, never widen them, so no chmod is needed.
def make_dir(path: StrPath) -> None:
    os.mkdir(path, DIR_MODE)


def create_file(path: StrPath) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def replace_file(
    directory: Path, tmp_name: str, name: str, data: bytes, *, durable: bool = True
) -> None:
    """Give `directory/name` the content `data` in one step: written under `tmp_name`,
    then renamed (durable: the file and the rename fsynced). OSError leaves no tmp."""
    tmp = directory / tmp_name
    fd = create_file(tmp)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, directory / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(directory)


def read_file(path: StrPath) -> bytes:
    with open(path, "rb") as f:
        return f.read()


os.register_at_fork(after_in_child=_forget_pool)

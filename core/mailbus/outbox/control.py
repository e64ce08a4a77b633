"""The control channel: how `mailbus queue retry/purge` (and the workbench) reach a
running OutboxSender, which holds the outbox lock for its whole life.

Requests and results are small JSON files in `<dir>/control/` (0700; files 0600):

    control/.<uuid>.request.tmp   being written by an admin (invisible to the sender)
    control/<uuid>.request        waiting: written, fsynced, then renamed into place
    control/<uuid>.taken          claimed by the sender (a rename: exactly one of the
                                  sender's claim and the admin's withdrawal wins)
    control/<uuid>.result         the answer, for the admin, who removes it

The sender polls the directory (it cannot be woken across processes), claims each
request, applies it under its lock, answers and removes the claim. Anything else in the
directory is set aside into `corrupt/control.<name>`, never read twice and never fatal.

The codec (`ControlRequest`, `Result`, `decode_request`, `decode_result`) is pure; the rest is
thin file I/O around it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mailbus.outbox.files import DIR_MODE, replace_file
from mailbus.outbox.fs_storage import UUID_RE, new_id
from mailbus.outbox.storage import OutboxError, State, json_object

CONTROL_DIR = "control"
# What an OutboxSender writes after its pid in the lock file: "this holder answers
# control requests". A holder without it (an admin command, an older sender, another
# tool) never will, so admin refuses at once instead of waiting for an answer.
SERVES_CONTROL = "control"
MAX_REQUEST_BYTES = 1 << 20
MAX_IDS = 10_000
# Results nobody collected (their admin died) and abandoned temporary files are removed
# after this long.
STALE_S = 300.0
ACTIONS = ("retry", "purge")
SELECTORS: dict[str, frozenset[str]] = {
    "retry": frozenset({"all"}),
    "purge": frozenset({"all", "dead", "corrupt"}),
}
_NAME_RE = re.compile(rf"({UUID_RE.pattern})\.(request|taken|result)")
_TMP_RE = re.compile(rf"\.({UUID_RE.pattern})\.(request|result)\.tmp")

Action = Literal["retry", "purge"]


class ControlError(OutboxError):
    """A control request was malformed, refused, or not answered in time."""


class ControlTimeoutError(ControlError):
    """The sender holding the outbox did not answer within the timeout."""


# -- the codec --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ControlRequest:
    """Retry or purge the entries named by `ids` and/or the `select`ors of the command
    line (`all` for retry; `all`, `dead`, `corrupt` for purge)."""

    action: Action
    ids: tuple[str, ...] = ()
    select: frozenset[str] = frozenset()
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        validate(self.action, self.ids, self.select, self.request_id)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "request_id": self.request_id,
                "action": self.action,
                "ids": list(self.ids),
                "select": sorted(self.select),
            }
        ).encode()


@dataclass(frozen=True, slots=True)
class Result:
    """What the sender did: `done` ids (in order), and `error` if it stopped early or
    refused the request (then `done` lists what was done before)."""

    request_id: str
    done: tuple[str, ...] = ()
    error: str = ""

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "request_id": self.request_id,
                "done": list(self.done),
                "error": self.error,
            }
        ).encode()


def validate(action: str, ids: Any, select: Any, request_id: Any) -> None:
    """ControlError unless these make a request we can act on. Ids become paths, so
    they must be outbox ids (UUIDs), nothing else."""
    if action not in ACTIONS:
        raise ControlError(f"unknown control action {action!r}")
    if not isinstance(request_id, str) or not UUID_RE.fullmatch(request_id):
        raise ControlError(f"bad request id {request_id!r}")
    if len(ids) > MAX_IDS:
        raise ControlError(f"too many ids in one request ({len(ids)} > {MAX_IDS})")
    for entry_id in ids:
        if not isinstance(entry_id, str) or not UUID_RE.fullmatch(entry_id):
            raise ControlError(f"not an outbox entry id: {entry_id!r}")
    unknown = sorted(s for s in select if s not in SELECTORS[action])
    if unknown:
        raise ControlError(f"unknown selector {unknown[0]!r} for {action}")
    if not ids and not select:
        raise ControlError(f"{action}: no entries named and no selector")


def _object(data: bytes, what: str) -> Mapping[str, Any]:
    try:
        value = json_object(data, what)
    except ValueError as exc:
        raise ControlError(f"unreadable {what}: {exc}") from None
    if value.get("version") != 1:
        raise ControlError(f"unreadable {what}: unknown version {value.get('version')!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ControlError(f"unreadable {what}: expected a list of strings")
    return tuple(value)


def decode_request(data: bytes) -> ControlRequest:
    if len(data) > MAX_REQUEST_BYTES:
        raise ControlError(f"request too large ({len(data)} bytes)")
    value = _object(data, "request")
    return ControlRequest(  # checks the action, the ids and the request id (validate)
        action=value.get("action"),  # type: ignore[arg-type]
        ids=_strings(value.get("ids", []), "request ids"),
        select=frozenset(_strings(value.get("select", []), "request selectors")),
        request_id=value.get("request_id"),  # type: ignore[arg-type]
    )


def decode_result(data: bytes) -> Result:
    value = _object(data, "result")
    request_id, error = value.get("request_id"), value.get("error", "")
    if not isinstance(request_id, str) or not isinstance(error, str):
        raise ControlError("unreadable result: bad request_id or error")
    return Result(request_id, _strings(value.get("done", []), "result ids"), error)


# -- files --------------------------------------------------------------------------------
def control_dir(root: Path) -> Path:
    """`<root>/control`, made 0700 if missing; refused if it is not a plain directory
    (a planted symlink would send our files elsewhere)."""
    path = root / CONTROL_DIR
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ControlError(f"{path} is not a directory")
    return path


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, never following a symlink, at most `limit`+1."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ControlError("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# -- the admin's side ---------------------------------------------------------------------
def submit(root: Path, request: ControlRequest) -> None:
    """Put `request` where the sender finds it: temp name, fsync, rename, fsync dir."""
    directory = control_dir(root)
    name = f"{request.request_id}.request"
    replace_file(directory, f".{name}.tmp", name, request.to_json())


def withdraw(root: Path, request_id: str) -> bool:
    """Take back a request the sender has not claimed; False if it already has."""
    try:
        os.unlink(root / CONTROL_DIR / f"{request_id}.request")
    except FileNotFoundError:
        return False
    return True


def take_result(root: Path, request_id: str) -> Result | None:
    """The sender's answer to `request_id` (removed once read), or None if none yet."""
    path = root / CONTROL_DIR / f"{request_id}.result"
    try:
        data = _read_regular(path, MAX_REQUEST_BYTES * 4)
    except FileNotFoundError:
        return None
    except (OSError, ControlError) as exc:
        raise ControlError(f"cannot read the answer {path}: {exc}") from None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    result = decode_result(data)
    if result.request_id != request_id:
        raise ControlError(f"answer {path} is for another request ({result.request_id})")
    return result


def forget_taken(root: Path, request_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(root / CONTROL_DIR / f"{request_id}.taken")


def pause(seconds: float) -> None:
    threading.Event().wait(seconds)


# -- the sender's side --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Incoming:
    """One thing found in control/: a request to apply, a claim left by a sender that
    died before answering (`abandoned`), or a file to set aside (`rejected`)."""

    name: str
    request_id: str = ""
    request: ControlRequest | None = None
    abandoned: bool = False
    rejected: str = ""


def scan(root: Path, now: float | None = None) -> Iterator[Incoming]:
    """What the sender must handle in control/, oldest name first. Removes results and
    temporary files nobody came back for within STALE_S; claims each request."""
    directory = root / CONTROL_DIR
    now = time.time() if now is None else now
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return
    for name in names:
        path = directory / name
        tmp = _TMP_RE.fullmatch(name)
        if tmp is not None:
            _remove_if_stale(path, now)
            continue
        match = _NAME_RE.fullmatch(name)
        if match is None:
            yield Incoming(name, rejected="foreign file (not a control request)")
            continue
        request_id, kind = match.group(1), match.group(2)
        if kind == "result":
            _remove_if_stale(path, now)
            continue
        if kind == "taken":
            # Claims live only while this thread applies them: this one is from a
            # sender that died in the middle.
            yield Incoming(name, request_id, abandoned=True)
            continue
        taken = directory / f"{request_id}.taken"
        try:
            os.rename(path, taken)
        except FileNotFoundError:
            continue  # withdrawn meanwhile
        try:
            request = decode_request(_read_regular(taken, MAX_REQUEST_BYTES))
            if request.request_id != request_id:
                raise ControlError(f"request_id {request.request_id} does not match the file name")
        except (OSError, ControlError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            yield Incoming(f"{request_id}.taken", request_id, rejected=f"bad request: {reason}")
            continue
        yield Incoming(f"{request_id}.taken", request_id, request)


def _remove_if_stale(path: Path, now: float) -> None:
    with contextlib.suppress(FileNotFoundError):
        if now - os.lstat(path).st_mtime > STALE_S:
            os.unlink(path)


def answer(root: Path, result: Result) -> None:
    """Publish `result` (atomically: the admin never reads half of it) and drop the
    claim. Not fsynced: after a power cut nobody waits for it."""
    directory = root / CONTROL_DIR
    name = f"{result.request_id}.result"
    replace_file(directory, f".{name}.tmp", name, result.to_json(), durable=False)
    forget_taken(root, result.request_id)


def set_aside(root: Path, name: str) -> Path:
    """Move control/<name> to corrupt/control.<name> (kept for inspection; `mailbus
    queue purge --corrupt` removes it)."""
    target = root / State.CORRUPT / f"{CONTROL_DIR}.{name}"
    if os.path.lexists(target):
        target = target.with_name(f"{target.name}.{new_id()}")
    try:
        os.rename(root / CONTROL_DIR / name, target)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
    return target

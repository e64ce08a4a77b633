"""The PostOffice's addressing rules as pure functions (sans-IO): which mailboxes a
letter goes to, which names a new mailbox may take, and where a participant sends.

Groups: the mailboxes named `<group>.<member>` (one level down) form the group
`<group>`; a letter to a name that is no mailbox goes to every member of the group of
that name. See docs/postoffice.md, "Groups"."""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping
from typing import TypeVar

B = TypeVar("B")


def group_of(name: str) -> str:
    """The group a mailbox belongs to ("" for a name without a dot)."""
    return name.rpartition(".")[0]


def resolve(name: str, boxes: Mapping[str, B], groups: Mapping[str, Mapping[str, B]]) -> list[B]:
    """The box named `name`, or else every member of the group `name`."""
    box = boxes.get(name)
    if box is not None:
        return [box]
    return list(groups.get(name, {}).values())


def name_conflict(
    name: str, boxes: Container[str], groups: Container[str], reserved: Collection[str]
) -> str:
    """Why a new mailbox may not be called `name` ("" if it may). A CREATEBOX never
    changes where letters to an existing address go (it needs no credentials): so
    `robot` is refused while `robot.arm` exists, as it would take the letters of the
    group `robot`. A name under a mailbox is allowed (the transport keeps
    `robot.arm.out` beside `robot.arm`): a mailbox's name keeps meaning that mailbox.
    Names being created (`reserved`) count as existing, so concurrent CREATEBOX cannot
    get round this (a name whose parent is being created is refused until that is
    done)."""
    if name in boxes or name in reserved:
        return "a mailbox of that name exists"
    if name in groups or any(group_of(r) == name for r in reserved):
        return "it is the group of existing mailboxes"
    parent = group_of(name)
    if parent in reserved:
        return f"{parent!r} is being created"
    return ""


def send_targets(
    recipients: Iterable[str],
    group: str,
    peers: Iterable[str],
    *,
    is_response: bool,
    observe_responses: bool,
) -> list[str]:
    """Where a participant of `group` sends a letter addressed to the mailboxes
    `recipients` (duplicates ignored): a response to askers who are all members goes
    to the group when `observe_responses`, so that every observer sees it and each
    asker still gets it once; a letter with recipients goes to them; one without goes
    to the configured `peers`, or else to the whole group."""
    direct = list(dict.fromkeys(recipients))
    members = bool(direct) and all(group_of(box) == group for box in direct)
    if members and is_response and observe_responses and group:
        return [group]
    if direct:
        return direct
    return list(peers) or [group]

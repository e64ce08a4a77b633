"""The routed mode's Sieve script generator (sans-IO): folder names, escaping, refusals.
The scripts are read back with sievelib's parser, an independent Sieve reader."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.errors import InvalidNameError
from mailbus.mail.sieve_script import (
    MAX_FOLDER_LENGTH,
    Routes,
    folder_name,
    sieve_script,
    sieve_string,
)
from mailbus.names import check_name
from sievelib.parser import Parser


def unquote(text: str) -> str:
    """A Sieve quoted string's value (RFC 5228 2.4.2: `\\x` stands for x)."""
    assert text.startswith('"') and text.endswith('"')
    return re.sub(r"\\(.)", r"\1", text[1:-1], flags=re.DOTALL)


def filed(script: str) -> list[tuple[str, str, str]]:
    """(guard header, Subject, folder) of every rule, read with sievelib's parser."""
    parser = Parser()
    assert parser.parse(script), script
    out: list[tuple[str, str, str]] = []

    def walk(commands: list[object], guard: str) -> None:
        for command in commands:
            test = getattr(command, "arguments", {}).get("test")
            children = getattr(command, "children", [])
            if test is not None and test.name == "exists":
                walk(children, unquote(test.arguments["header-names"]))
            elif test is not None and test.name == "header":
                assert test.arguments["match-type"] == ":is"
                action = children[0]
                assert action.name == "fileinto" and children[1].name == "stop"
                out.append(
                    (
                        guard,
                        unquote(test.arguments["key-list"]),
                        unquote(action.arguments["mailbox"]),
                    )
                )
            else:
                walk(children, guard)

    walk(parser.result, "")
    return out


def test_each_kind_has_its_own_folder_and_the_rest_stays_in_inbox() -> None:
    routes = Routes(topics=("robot/pose", "a"), services=("add",))
    rules = filed(sieve_script(routes))
    assert rules == [
        ("Publisher-GID", "robot/pose", "mailbus-t-robot_2fpose"),
        ("Publisher-GID", "a", "mailbus-t-a"),
        ("In-Reply-To", "add", "mailbus-r-add"),
        ("Client-GID", "add", "mailbus-s-add"),
    ]
    assert routes.folder("t", "a") == "mailbus-t-a"
    assert routes.folder("t", "b") is None  # not routed: INBOX
    assert routes.folders() == [
        "mailbus-t-robot_2fpose",
        "mailbus-t-a",
        "mailbus-s-add",
        "mailbus-r-add",
    ]
    # Exact comparison: Mailbus names are case-sensitive.
    assert ':comparator "i;octet"' in sieve_script(routes)
    assert folder_name("mailbus", "t", "A") != folder_name("mailbus", "t", "a")


@pytest.mark.parametrize(
    "name",
    ['say "hi"', "back\\slash", "star*", 'q"\\*"; fileinto "INBOX.evil"; stop; #', "température"],
)
def test_quotes_backslashes_and_stars_are_escaped_not_obeyed(name: str) -> None:
    rules = filed(sieve_script(Routes(topics=(name,))))
    assert [(subject, folder) for _, subject, folder in rules] == [
        (name, folder_name("mailbus", "t", name))
    ]
    assert re.fullmatch(r"mailbus-t-[a-z0-9_-]+", rules[0][2])


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("line\nbreak", "control character"),
        ("cr\rhere", "control character"),
        ("", "empty"),
        (" padded", "white space"),
        ("é" * 40, "cannot be routed"),
    ],
)
def test_a_name_that_cannot_be_a_folder_is_refused_clearly(name: str, words: str) -> None:
    with pytest.raises(InvalidNameError, match=words):
        Routes(topics=(name,))
    with pytest.raises(InvalidNameError, match=words):
        Routes(services=(name,))


def test_bad_prefixes_and_strings_are_refused() -> None:
    for prefix in ("", "Mailbus", "a.b", "a/b", "1x", 'x"'):
        with pytest.raises(InvalidNameError, match="folder prefix"):
            Routes(topics=("a",), prefix=prefix)
    with pytest.raises(InvalidNameError):
        sieve_string("two\nlines")


names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(
    lambda n: _valid(n) and len(folder_name("mailbus", "t", n)) <= MAX_FOLDER_LENGTH
)


def _valid(name: str) -> bool:
    try:
        check_name(name)
    except InvalidNameError:
        return False
    return True


@settings(max_examples=60, deadline=None)
@given(st.lists(names, min_size=1, max_size=4, unique=True))
def test_any_valid_names_read_back_exactly_into_distinct_safe_folders(topics: list[str]) -> None:
    rules = filed(sieve_script(Routes(topics=tuple(topics))))
    assert [subject for _, subject, _ in rules] == topics
    folders = [folder for _, _, folder in rules]
    assert len(set(folders)) == len(folders)  # injective
    assert all(re.fullmatch(r"mailbus-t-[a-z0-9_-]+", f) for f in folders)


def test_the_routed_receiver_reads_each_routed_names_folder_and_inbox_for_the_rest() -> None:
    from mailbus.mail.imap_receiver import ImapSettings
    from mailbus.mail.routed_receiver import RoutedImapReceiver

    receiver = RoutedImapReceiver(
        ImapSettings("imaps://127.0.0.1:1", "u@x.test", "p"),
        routes=Routes(topics=("a",), services=("add",)),
    )
    both = receiver.folders_for(frozenset({"a"}), frozenset({"add"}), frozenset({"add"}))
    assert both == {"mailbus-t-a", "mailbus-s-add", "mailbus-r-add"}
    # A name the script does not route stays in INBOX: read it there.
    assert receiver.folders_for(frozenset({"a", "b"}), frozenset(), frozenset({"other"})) == {
        "mailbus-t-a",
        "INBOX",
    }
    assert receiver.folders_for(frozenset(), frozenset(), frozenset()) == frozenset()


def test_status_answers_are_read_by_mailbox_later_ones_winning() -> None:
    from mailbus.mail.routed_receiver import folder_status

    lines = [
        b"mailbus-t-a (UIDNEXT 4 UIDVALIDITY 77)",
        b'"INBOX" (UIDNEXT 9 UIDVALIDITY 5)',
        b"mailbus-t-a (MESSAGES 4 UIDNEXT 5)",  # a NOTIFY announcement, later
        b"garbage",
    ]
    assert folder_status(lines) == {
        "mailbus-t-a": {b"UIDNEXT": 5, b"UIDVALIDITY": 77, b"MESSAGES": 4},
        "INBOX": {b"UIDNEXT": 9, b"UIDVALIDITY": 5},
    }

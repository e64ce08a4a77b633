"""validate() takes what it has seen pass at a glance (every email sent goes through it,
in-process too): the glance must never pass an email the full check refuses, and the
full check's errors must be the same whatever was seen before."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.email_message import Email, _at_a_glance, _validate_in_full, validate
from mailbus.errors import InvalidNameError

# Good and bad pieces mixed, so that known-good names meet bad values and the reverse.
pieces = st.one_of(
    st.sampled_from(["lab/x", "Unit", "a@b.c", "<1@x>", "Subject", "X-Note", "12", " 1", ""]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    st.text(alphabet="ab<>@ =?\r\n\t-", max_size=10),
)
emails = st.builds(
    Email,
    subject=pieces,
    body=st.just("{}"),
    sender=pieces,
    to=st.lists(pieces, max_size=2).map(tuple),
    headers=st.dictionaries(pieces, pieces, max_size=3),
    message_id=pieces,
    in_reply_to=pieces,
    references=st.lists(pieces, max_size=2).map(tuple),
)


def full_check(email: Email) -> str | None:
    try:
        _validate_in_full(email)
    except InvalidNameError as exc:
        return str(exc)
    return None


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(seen=st.lists(emails, max_size=4), email=emails)
def test_the_glance_passes_nothing_the_full_check_refuses(seen: list[Email], email: Email) -> None:
    for earlier in seen:  # fills the known-good sets with whatever passed
        with contextlib.suppress(InvalidNameError):
            validate(earlier)
    expected = full_check(email)
    if _at_a_glance(email):
        assert expected is None
    if expected is None:
        validate(email)
    else:
        with pytest.raises(InvalidNameError) as raised:
            validate(email)
        assert str(raised.value) == expected


def test_a_known_topic_does_not_make_a_header_name_good() -> None:
    """Each kind has its own set: a Subject seen as a topic is still a reserved name."""
    validate(Email(subject="Subject", body="{}", to=("a@b.c",)))
    with pytest.raises(InvalidNameError, match="set by Mailbus"):
        validate(Email(subject="x", body="{}", to=("a@b.c",), headers={"Subject": "forged"}))

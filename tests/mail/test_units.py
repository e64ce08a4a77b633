"""Sans-IO parts of the mail transport: back-off, the UID cursor, failure
classification, settings and option checks. No servers."""

from __future__ import annotations

import ssl

import pycurl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus.backoff import Backoff
from mailbus.errors import ConfigError
from mailbus.mail.imap_receiver import (
    SIZE_ITEMS,
    ImapReceiver,
    ImapSettings,
    body_items,
    body_of,
    response_bytes,
)
from mailbus.mail.smtp_sender import Failure, SmtpSettings, classify, failure_text
from mailbus.mail.tls import TlsSettings, curl_options, ssl_context
from mailbus.mail.transport import mail_section
from mailbus.mail.uids import (
    Resumed,
    Started,
    UidCursor,
    UidRange,
    UidValidityChanged,
    uid_set,
)
from mailbus.options import options_from_mapping, redact_url

# -- back-off ----------------------------------------------------------------------------


def test_backoff_doubles_then_caps() -> None:
    b = Backoff(initial=0.1, maximum=1.0, jitter=0.0)
    assert [b.delay(n) for n in range(0, 7)] == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


@given(st.integers(min_value=1, max_value=10_000), st.floats(min_value=0, max_value=1))
def test_backoff_stays_within_jitter_band(attempt: int, rnd: float) -> None:
    b = Backoff(initial=0.05, maximum=5.0, jitter=0.25)
    delay = b.delay(attempt, rnd)
    full = min(0.05 * 2.0 ** min(attempt - 1, 60), 5.0)
    assert 0.75 * full - 1e-12 <= delay <= full + 1e-12


@pytest.mark.parametrize(
    "kwargs", [{"initial": 0}, {"initial": 2, "maximum": 1}, {"jitter": 1.0}, {"jitter": -0.1}]
)
def test_backoff_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


# -- the UID cursor ----------------------------------------------------------------------


def test_cursor_starts_at_uidnext_and_reads_only_new_mail() -> None:
    c = UidCursor()
    assert c.selected(uidvalidity=7, uidnext=42) == Started(7, 42)
    r = c.next_range()
    assert str(r) == "42:*"
    # `42:*` with nothing new returns the highest message (41): not delivered.
    assert c.accept({41: None}, r) == []
    assert c.next_uid == 42
    assert c.accept([43, 42, 45], r) == [42, 43, 45]
    assert str(c.next_range()) == "46:*"


def test_cursor_start_uid_reads_backlog_in_bounded_chunks() -> None:
    c = UidCursor(start_uid=1, batch=100)
    c.selected(1, 251)
    r1 = c.next_range()
    assert (r1.first, r1.last) == (1, 100)
    # Gaps (expunged mail) in a closed range below UIDNEXT are skipped over.
    assert c.accept([1, 2, 50], r1) == [1, 2, 50]
    assert c.next_uid == 101
    r2 = c.next_range()
    assert str(r2) == "101:200"
    c.accept(range(101, 201), r2)
    assert str(c.next_range()) == "201:*"


def test_cursor_ignores_uids_outside_the_requested_range() -> None:
    c = UidCursor(start_uid=10, batch=5)
    c.selected(1, 100)
    r = c.next_range()
    assert c.accept([9, 10, 14, 15, 99], r) == [10, 14]
    assert c.next_uid == 15


def test_cursor_resumes_after_reconnect_and_restarts_on_new_uidvalidity() -> None:
    c = UidCursor()
    c.selected(5, 10)
    c.accept([10, 11], c.next_range())
    assert c.selected(5, 30) == Resumed(5, 12)
    assert str(c.next_range()) == "12:*"
    assert c.selected(6, 3) == UidValidityChanged(5, 6, 1)
    assert c.next_uid == 1


def test_cursor_needs_select_first_and_sane_arguments() -> None:
    with pytest.raises(RuntimeError):
        UidCursor().next_range()
    with pytest.raises(ValueError):
        UidCursor(start_uid=0)
    with pytest.raises(ValueError):
        UidCursor(batch=0)


@given(
    st.integers(min_value=1, max_value=50),
    st.lists(st.lists(st.integers(min_value=1, max_value=400), max_size=30), max_size=30),
    st.integers(min_value=1, max_value=300),
)
def test_cursor_never_delivers_a_uid_twice_or_out_of_order(
    batch: int, answers: list[list[int]], uidnext: int
) -> None:
    c = UidCursor(start_uid=1, batch=batch)
    c.selected(1, uidnext)
    delivered: list[int] = []
    for answer in answers:
        r = c.next_range()
        delivered.extend(c.accept(answer, r))
    assert delivered == sorted(set(delivered))


@given(st.sets(st.integers(min_value=1, max_value=2000), max_size=200), st.integers(1, 64))
def test_cursor_delivers_every_existing_uid_of_a_backlog(existing: set[int], batch: int) -> None:
    """A server that answers each range truthfully: every UID is delivered once."""
    uidnext = max(existing, default=0) + 1
    c = UidCursor(start_uid=1, batch=batch)
    c.selected(1, uidnext)
    delivered: list[int] = []
    for _ in range(10_000):
        r = c.next_range()
        last = uidnext - 1 if r.last is None else r.last
        answer = {u for u in existing if r.first <= u <= last}
        if r.last is None and not answer and existing:
            answer = {max(existing)}  # RFC 3501: `n:*` always names the highest message
        delivered.extend(c.accept(answer, r))
        if r.last is None:
            break
    assert delivered == sorted(existing)


def test_new_uids_does_not_move_the_cursor_accept_does() -> None:
    c = UidCursor()
    c.selected(1, 42)
    r = c.next_range()
    assert c.new_uids([41], r) == []  # `42:*` answered with the highest, old message
    assert c.new_uids([41, 42, 44], r) == [42, 44]
    assert c.next_uid == 42  # bodies not fetched yet: a reconnect asks again
    assert c.accept([41, 42, 44], r) == [42, 44]
    assert c.next_uid == 45


def test_uid_set_collapses_runs() -> None:
    assert uid_set([7]) == "7"
    assert uid_set([3, 1, 2, 7, 9, 10, 2]) == "1:3,7,9:10"
    for bad in ([], [0, 1]):
        with pytest.raises(ValueError):
            uid_set(bad)


@given(st.sets(st.integers(min_value=1, max_value=5000), min_size=1, max_size=300))
def test_uid_set_names_exactly_the_uids(uids: set[int]) -> None:
    named: set[int] = set()
    text = uid_set(uids)
    for part in text.split(","):
        low, _, high = part.partition(":")
        named.update(range(int(low), int(high or low) + 1))
    assert named == uids
    assert text.count(",") < len(uids)


def test_a_mail_expunged_between_the_two_fetches_is_counted_not_delivered_empty() -> None:
    receiver = ImapReceiver(ImapSettings("imaps://mail.example", "u", "p"), max_message_bytes=100)
    assert receiver._inbound(5, 10, None) is None
    assert receiver.counters["vanished"] == 1
    assert receiver._inbound(6, 500, None) is None  # oversized: never asked for
    assert receiver.counters["oversized"] == 1
    raw = receiver._inbound(7, 3, {b"BODY[]<0>": b"abc"})
    assert raw is not None and (raw.data, raw.origin) == (b"abc", "uid:7")


def test_response_bytes_counts_lines_and_literals() -> None:
    data = [(b"1 (UID 5 BODY[]<0> {3}", b"abc"), b")", b"2 (UID 6 RFC822.SIZE 10)", None]
    assert response_bytes(data) == 22 + 3 + 1 + 24


def test_uid_range_text() -> None:
    assert str(UidRange(3, None)) == "3:*"
    assert str(UidRange(3, 9)) == "3:9"


# -- SMTP failure classification ---------------------------------------------------------


@pytest.mark.parametrize(
    ("curl_code", "smtp_code", "expected"),
    [
        (pycurl.E_LOGIN_DENIED, 535, Failure.LOGIN),
        (pycurl.E_COULDNT_CONNECT, 0, Failure.TRANSIENT),
        (pycurl.E_OPERATION_TIMEDOUT, 0, Failure.TRANSIENT),
        (pycurl.E_SEND_ERROR, 451, Failure.TRANSIENT),
        (pycurl.E_SEND_ERROR, 452, Failure.TRANSIENT),
        (pycurl.E_SEND_ERROR, 550, Failure.REJECTED),
        (pycurl.E_SEND_ERROR, 552, Failure.REJECTED),
        (pycurl.E_PEER_FAILED_VERIFICATION, 0, Failure.TLS),
        (pycurl.E_USE_SSL_FAILED, 0, Failure.TLS),
        (pycurl.E_RECV_ERROR, 0, Failure.TRANSIENT),
    ],
)
def test_classify(curl_code: int, smtp_code: int, expected: Failure) -> None:
    assert classify(curl_code, smtp_code) is expected


def test_a_552_says_the_email_is_too_large_and_other_codes_keep_curls_words() -> None:
    text = failure_text(552, "MAIL failed: 552", 10_812_345)
    assert text.startswith("MAIL failed: 552: the email of 10,812,345 bytes is over")
    assert failure_text(550, "RCPT failed: 550", 10) == "RCPT failed: 550"
    assert failure_text(0, "Couldn't connect to server", 10) == "Couldn't connect to server"


# -- settings ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://x", "smtp://", "smtp://user:pw@host", "imaps://host"])
def test_smtp_settings_refuse_bad_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="url-smtp"):
        SmtpSettings(url, "u", "p")


@pytest.mark.parametrize("url", ["http://x", "imap://", "imaps://u:p@host", "smtp://host"])
def test_imap_settings_refuse_bad_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="url-imap"):
        ImapSettings(url, "u", "p")


# Each URL holds the password "hunter2": wrong scheme, no host, bad port, credentials
# in the URL, a password with `/` or `@` in it, no `//`.
LEAKY_URLS = [
    "{s}x://robot:hunter2@mail.example:25",
    "{s}://robot:hunter2@",
    "{s}://robot:hunter2@mail.example:notaport",
    "{s}://robot:hunter2@mail.example",
    "{s}://robot:hun/ter2@mail.example",
    "{s}://robot:hun@ter2@mail.example",
    "{s}x://robot:hun/ter2@mail.example",
    "robot:hunter2@mail.example",
    "{s}://robot:hunter2/@mail.example",
]


def _no_password(exc: BaseException) -> None:
    text = str(exc)
    assert "hunter2" not in text and "ter2" not in text, text


@pytest.mark.parametrize("url", LEAKY_URLS)
def test_smtp_and_imap_settings_never_show_the_password(url: str) -> None:
    for scheme, settings, key in (
        ("smtp", SmtpSettings, "url-smtp"),
        ("imap", ImapSettings, "url-imap"),
    ):
        with pytest.raises(ConfigError, match=key) as caught:
            settings(url.format(s=scheme), "u", "p")
        _no_password(caught.value)


@pytest.mark.parametrize("url", LEAKY_URLS)
def test_options_never_show_the_password_from_file_or_environment(url: str) -> None:
    for scheme, key in (("smtp", "url-smtp"), ("imap", "url-imap")):
        good = {"url-smtp": "smtps://h", "url-imap": "imaps://h"}
        raw = {"transport": "email", "username": "u@h", "password": "p", **good}
        with pytest.raises(ConfigError, match=key) as from_file:
            options_from_mapping({**raw, key: url.format(s=scheme)}, {})
        _no_password(from_file.value)
        env = {"MAILBUS_" + key.upper().replace("-", "_"): url.format(s=scheme)}
        with pytest.raises(ConfigError, match=key) as from_env:
            options_from_mapping(raw, env)
        _no_password(from_env.value)


def test_redacted_url_keeps_what_helps() -> None:
    assert (
        redact_url("smtpx://robot:hunter2@mail.example:25") == "smtpx://robot:***@mail.example:25"
    )
    assert redact_url("smtp://hunter2@mail.example") == "smtp://***@mail.example"
    assert redact_url("robot:hunter2@mail.example") == "***@mail.example"
    assert redact_url("imaps://mail.example/Box") == "imaps://mail.example/Box"
    with pytest.raises(ConfigError) as caught:
        SmtpSettings("smtpx://robot:hunter2@mail.example", "u", "p")
    assert "smtpx://robot:***@mail.example" in str(caught.value)


@given(st.text(min_size=1), st.sampled_from(["smtp", "imaps", "x"]), st.booleans())
def test_redact_url_hides_any_password(password: str, scheme: str, slashes: bool) -> None:
    secret = "Zq9" + password
    url = f"{scheme}:{'//' if slashes else ''}robot:{secret}@mail.example:25/box"
    shown = redact_url(url)
    assert secret not in shown
    assert shown.endswith("@mail.example:25/box")


def test_imap_settings_ports_and_mailbox_from_url() -> None:
    assert ImapSettings("imaps://mail.example.com", "u", "p").port == 993
    assert ImapSettings("imap://mail.example.com", "u", "p").port == 143
    s = ImapSettings("imap://mail.example.com:1143/Mailbus", "u", "p")
    assert (s.port, s.mailbox, s.implicit_tls) == (1143, "Mailbus", False)


def test_passwords_never_appear_in_reprs() -> None:
    assert "hunter2" not in repr(SmtpSettings("smtps://h", "u", "hunter2"))
    assert "hunter2" not in repr(ImapSettings("imaps://h", "u", "hunter2"))


def test_tls_settings_check_the_ca_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="ca-file"):
        TlsSettings(ca_file=str(tmp_path / "missing.pem"))


def test_tls_verifies_by_default() -> None:
    context = ssl_context(TlsSettings())
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert (pycurl.SSL_VERIFYPEER, 1) in curl_options(TlsSettings())
    assert (pycurl.SSL_VERIFYHOST, 2) in curl_options(TlsSettings())
    off = ssl_context(TlsSettings(verify=False))
    assert off.verify_mode == ssl.CERT_NONE
    assert (pycurl.SSL_VERIFYPEER, 0) in curl_options(TlsSettings(verify=False))


def test_fetch_items_and_body_of() -> None:
    # The first FETCH (over `first:*`) asks no body: it names the highest message even
    # when nothing is new.
    assert SIZE_ITEMS == [b"UID", b"RFC822.SIZE"]
    assert body_items(1000) == [b"UID", b"BODY.PEEK[]<0.1000>"]
    assert body_of({b"SEQ": 1, b"BODY[]<0>": b"abc"}) == b"abc"
    assert body_of({b"SEQ": 1, b"BODY[]": b"xyz"}) == b"xyz"
    assert body_of({b"SEQ": 1}) is None


def _options(mail: dict[str, object]):  # type: ignore[no-untyped-def]
    return options_from_mapping(
        {
            "transport": "email",
            "url-smtp": "smtps://h",
            "url-imap": "imaps://h",
            "username": "u@h",
            "password": "p",
            "mail": mail,
        },
        {},
    )


def test_mail_section_checks_keys_and_types() -> None:
    assert mail_section(_options({"start-uid": 5, "reconnect-max-s": 2})) == {
        "start-uid": 5,
        "reconnect-max-s": 2.0,
    }
    for bad, key in [
        ({"start-uid": 0}, "start-uid"),
        ({"start-uid": "1"}, "start-uid"),
        ({"batch": True}, "batch"),
        ({"reconnect-max-s": 0.0}, "reconnect-max-s"),
        ({"nonsense": 1}, "nonsense"),
    ]:
        with pytest.raises(ConfigError, match=key):
            mail_section(_options(bad))


def test_password_from_environment_not_file() -> None:
    options = options_from_mapping(
        {"transport": "email", "url-smtp": "smtps://h", "url-imap": "imaps://h", "username": "u"},
        {"MAILBUS_PASSWORD": "s3cret"},
    )
    assert options.password == "s3cret"
    assert "s3cret" not in repr(options)

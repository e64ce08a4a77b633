"""DKIM signing and verification (mailbus.signing) on bytes: what the signature covers,
byte by byte; tampered headers and bodies; wrong, missing and malformed keys; the
replay guard; and the engine's receive path with a signature gate."""

from __future__ import annotations

import base64
import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mailbus import headers as H
from mailbus.email_message import Email, from_bytes, to_bytes
from mailbus.errors import ConfigError
from mailbus.options import options_from_mapping
from mailbus.signing.config import key_name, signing_config
from mailbus.signing.gate import SignatureGate, signer_from_sections
from mailbus.signing.keys import (
    PrivateKey,
    load_private_key,
    new_ed25519_key,
    parse_private_key,
    write_private_key,
)
from mailbus.signing.sign import SIGNED_HEADERS, Signer
from mailbus.signing.verify import Verifier

SELECTOR = "robots"
DOMAIN = "mailbus.test"
NAME = key_name(SELECTOR, DOMAIN)


def mailbus_email(subject: str = "lab/temperature", body: str = '{"celsius": 21}') -> Email:
    return Email(
        subject=subject,
        body=body,
        sender="robot@mailbus.test",
        to=("inbox@mailbus.test",),
        headers={
            H.SOURCE_TIMESTAMP: str(time.time_ns()),
            H.PUBLISHER_GID: "0123456789abcdef",
            "Unit": "celsius",
        },
        message_id=f"<{os.urandom(8).hex()}@mailbus.test>",
    )


@pytest.fixture(scope="module")
def ed_key() -> tuple[PrivateKey, str]:
    return new_ed25519_key()


@pytest.fixture(scope="module")
def rsa_key() -> tuple[PrivateKey, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    record = "v=DKIM1; k=rsa; p=" + base64.b64encode(der).decode()
    return parse_private_key("rsa-sha256", pem, "test"), record


def signed(key: PrivateKey, email: Email | None = None) -> tuple[bytes, bytes]:
    plain = to_bytes(email or mailbus_email())
    return plain, Signer(key, SELECTOR, DOMAIN).sign(plain)


def signature_tags(data: bytes) -> dict[str, str]:
    header = data.split(b"\r\n\r\n", 1)[0].decode()
    value = re.match(r"DKIM-Signature: (.*?)\r\n(?! )", header + "\r\nX", re.S)
    assert value is not None
    unfolded = re.sub(r"\r\n[ \t]+", " ", value.group(1))
    return {
        k.strip(): re.sub(r"\s+", "", v)
        for k, v in (tag.split("=", 1) for tag in unfolded.split(";") if tag.strip())
    }


# -- signing and verifying ----------------------------------------------------------------


@pytest.mark.parametrize("which", ["ed_key", "rsa_key"])
def test_signed_email_verifies_and_reads_the_same(which: str, request: Any) -> None:
    key, record = request.getfixturevalue(which)
    email = mailbus_email()
    plain, data = signed(key, email)
    # Signing only puts one header in front: every byte after it is the email as built.
    assert data.startswith(b"DKIM-Signature: ") and data.endswith(plain)
    assert data.count(b"DKIM-Signature") == 1
    verdict = Verifier({NAME: record}).verify(data)
    assert verdict.status == "verified"
    back = from_bytes(data)
    assert (back.subject, back.body, back.message_id) == (
        email.subject,
        email.body,
        email.message_id,
    )
    assert {k: v for k, v in back.headers.items() if k != "DKIM-Signature"} == email.headers


def test_the_signature_covers_every_meaningful_header_present_ones_twice(ed_key: Any) -> None:
    key, _ = ed_key
    _, data = signed(key)
    tags = signature_tags(data)
    assert tags["a"] == "ed25519-sha256"
    assert tags["d"] == DOMAIN and tags["s"] == SELECTOR
    assert tags["c"] == "relaxed/simple"
    assert "l" not in tags  # the whole body
    names = tags["h"].split(":")
    present = {"from", "to", "subject", "date", "message-id", "content-transfer-encoding"}
    present |= {"source-timestamp", "publisher-gid", "unit"}
    for name in present:
        # Once more than it appears: a second instance added later breaks the signature.
        assert names.count(name) == 2, name
    absent = {"cc", "in-reply-to", "references", "client-gid", "request-sequence-number"}
    for name in absent:
        # Signed as absent: adding one (an In-Reply-To, say) breaks the signature.
        assert names.count(name) == 1, name
    assert set(SIGNED_HEADERS) <= set(names)
    # ed25519 signatures are 64 bytes.
    assert len(base64.b64decode(tags["b"])) == 64


@pytest.mark.parametrize(
    "added",
    [b"In-Reply-To: <req-1@mailbus.test>\r\n", b"Publisher-Sequence-Number: 7\r\n"],
    ids=["in-reply-to", "sequence-number"],
)
def test_adding_a_header_the_email_lacked_fails(ed_key: Any, added: bytes) -> None:
    key, record = ed_key
    _, data = signed(key)
    assert Verifier({NAME: record}).verify(added + data).status.startswith("failed: ")


def test_unsigned_email_is_unsigned(ed_key: Any) -> None:
    _, record = ed_key
    assert Verifier({NAME: record}).verify(to_bytes(mailbus_email())).status == "unsigned"


def test_tampered_body_fails(ed_key: Any) -> None:
    key, record = ed_key
    _, data = signed(key, mailbus_email(body="pay 10"))
    tampered = data.replace(b"pay 10", b"pay 99")
    assert tampered != data
    status = Verifier({NAME: record}).verify(tampered).status
    assert status == "failed: body hash mismatch (the body was changed)"


@pytest.mark.parametrize(
    "edit",
    [
        (b"Subject: lab/temperature", b"Subject: lab/pressure"),
        (b"Source-Timestamp: 1", b"Source-Timestamp: 2"),
        (b"Unit: celsius", b"Unit: kelvin"),
        (b"From: robot@", b"From: thief@"),
    ],
    ids=["subject", "metadata", "custom", "from"],
)
def test_tampered_header_fails(ed_key: Any, edit: tuple[bytes, bytes]) -> None:
    key, record = ed_key
    _, data = signed(key)
    tampered = data.replace(*edit, 1)
    assert tampered != data
    status = Verifier({NAME: record}).verify(tampered).status
    assert status.startswith("failed: signature by robots._domainkey.mailbus.test does not verify")


def test_a_second_subject_added_on_top_fails(ed_key: Any) -> None:
    key, record = ed_key
    _, data = signed(key)
    # Readers take the first Subject, DKIM the last: the oversigned h= catches it.
    added = b"Subject: admin/shutdown\r\n" + data
    assert from_bytes(added).subject == "admin/shutdown"
    assert Verifier({NAME: record}).verify(added).status.startswith("failed: ")


def test_a_header_added_by_a_relay_is_not_passed_on_as_signed(ed_key: Any) -> None:
    key, record = ed_key
    _, data = signed(key)
    relayed = b"Received: from relay\r\nPriority: urgent\r\n" + data
    verdict = Verifier({NAME: record}).verify(relayed)
    assert verdict.verified
    email = SignatureGate.trusted(from_bytes(relayed), verdict)
    assert "Priority" not in email.headers and "Received" not in email.headers
    assert email.headers["Unit"] == "celsius"


def test_wrong_key_fails(ed_key: Any) -> None:
    key, _ = ed_key
    _, other_record = new_ed25519_key()
    _, data = signed(key)
    status = Verifier({NAME: other_record}).verify(data).status
    assert status == (
        "failed: signature by robots._domainkey.mailbus.test does not verify "
        "(a signed header was changed)"
    )


def test_key_not_in_keyring_fails(ed_key: Any) -> None:
    key, record = ed_key
    _, data = signed(key)
    status = Verifier({key_name("other", DOMAIN): record}).verify(data).status
    assert status == "failed: no key for robots._domainkey.mailbus.test in the keyring"


def test_signature_over_part_of_the_body_or_headers_is_refused(ed_key: Any) -> None:
    import dkim

    key, record = ed_key
    plain = to_bytes(mailbus_email())
    partial = dkim.sign(
        plain,
        SELECTOR.encode(),
        DOMAIN.encode(),
        key.material,
        signature_algorithm=b"ed25519-sha256",
        include_headers=[b"from"],
    )
    status = Verifier({NAME: record}).verify(partial + plain).status
    assert status.startswith("failed: the signature does not cover ")
    assert "subject" in status and "source-timestamp" in status
    with_length = dkim.sign(
        plain,
        SELECTOR.encode(),
        DOMAIN.encode(),
        key.material,
        signature_algorithm=b"ed25519-sha256",
        include_headers=[h.encode() for h in SIGNED_HEADERS],
        length=True,
    )
    status = Verifier({NAME: record}).verify(with_length + plain).status
    assert status == "failed: the signature covers only part of the body (l=)"


def test_malformed_signature_header_fails_without_raising(ed_key: Any) -> None:
    _, record = ed_key
    plain = to_bytes(mailbus_email())
    for junk in (b"garbage", b"v=1; a=ed25519-sha256; d=mailbus.test", b"v=1; ;;=="):
        status = Verifier({NAME: record}).verify(b"DKIM-Signature: " + junk + b"\r\n" + plain)
        assert status.status.startswith("failed: malformed signature"), status


# -- keys and options ---------------------------------------------------------------------


def signing_options(tmp_path: Path, **signing: Any) -> Any:
    return options_from_mapping({"signing": signing}, {})


def test_key_file_round_trip_and_own_key_checked_against_keyring(
    tmp_path: Path, ed_key: Any
) -> None:
    key, record = ed_key
    path = tmp_path / "robot.key"
    write_private_key(path, key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    options = signing_options(
        tmp_path,
        domain=DOMAIN,
        selector=SELECTOR,
        **{"private-key-file": str(path), "keyring": {NAME: record}},
    )
    signer = signer_from_sections(options.sections)
    assert signer is not None
    assert key.material.decode() not in repr(signer) + repr(signer.key)
    _, other = new_ed25519_key()
    mismatched = signing_options(
        tmp_path,
        domain=DOMAIN,
        selector=SELECTOR,
        **{"private-key-file": str(path), "keyring": {NAME: other}},
    )
    with pytest.raises(ConfigError, match="does not match the public key"):
        signer_from_sections(mismatched.sections)


def test_key_from_an_environment_variable(ed_key: Any) -> None:
    key, _ = ed_key
    config = signing_config(
        {
            "signing": {
                "domain": DOMAIN,
                "selector": SELECTOR,
                "private-key-env": "ROBOT_DKIM_KEY",
            }
        }
    )
    assert config is not None
    loaded = load_private_key(config, {"ROBOT_DKIM_KEY": key.material.decode()})
    assert loaded.material == key.material
    with pytest.raises(ConfigError, match="variable ROBOT_DKIM_KEY is not set"):
        load_private_key(config, {})


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (b"not a key at all", 0o600, "is not an ed25519 private key"),
        (base64.b64encode(b"x" * 31), 0o600, "is not an ed25519 private key"),
        (None, 0o644, "can be read by others"),
    ],
    ids=["garbage", "short-seed", "world-readable"],
)
def test_bad_private_key_files_are_config_errors_that_never_show_the_key(
    tmp_path: Path, ed_key: Any, content: bytes | None, mode: int, message: str
) -> None:
    key, _ = ed_key
    data = key.material if content is None else content
    path = tmp_path / "robot.key"
    path.write_bytes(data)
    path.chmod(mode)
    config = signing_config(
        {"signing": {"domain": DOMAIN, "selector": SELECTOR, "private-key-file": str(path)}}
    )
    assert config is not None
    with pytest.raises(ConfigError, match=message) as caught:
        load_private_key(config)
    assert data.decode() not in str(caught.value)


def test_missing_key_file(tmp_path: Path) -> None:
    config = signing_config(
        {
            "signing": {
                "domain": DOMAIN,
                "selector": SELECTOR,
                "private-key-file": str(tmp_path / "nope.key"),
            }
        }
    )
    assert config is not None
    with pytest.raises(ConfigError, match="no such file"):
        load_private_key(config)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"colour": "red"}, "signing.colour"),
        ({"algorithm": "rsa-sha1"}, "signing.algorithm"),
        ({"require-signature": "yes"}, "signing.require-signature"),
        ({"require-signature": True}, "signing.require-signature"),  # no keyring
        ({"private-key-file": "k"}, "signing.domain"),
        ({"domain": "bad domain", "selector": "s", "private-key-file": "k"}, "signing.domain"),
        ({"keyring": {"robots.mailbus.test": "p=AAAA"}}, "signing.keyring.robots.mailbus.test"),
        ({"keyring": {NAME: "no key here"}}, f"signing.keyring.{NAME}"),
        ({"max-age-s": 0}, "signing.max-age-s"),
        (
            {"private-key-env": "A B", "domain": "d.test", "selector": "s"},
            "signing.private-key-env",
        ),
    ],
)
def test_bad_signing_options_name_the_key(table: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        options_from_mapping({"signing": table}, {})
    assert caught.value.key == key


def test_unusable_keyring_record_is_refused_at_init() -> None:
    options = options_from_mapping({"signing": {"keyring": {NAME: "v=DKIM1; k=ed25519; p=AAAA"}}})
    with pytest.raises(ConfigError, match="not a usable DKIM key"):
        SignatureGate.from_sections(options.sections)


def test_hostile_sizes_are_refused_before_dkimpy_scans_them(ed_key: Any) -> None:
    import dkim

    key, record = ed_key
    plain = to_bytes(mailbus_email())
    padded = b"".join(b"Pad: %d\r\n" % i for i in range(1001)) + plain
    status = Verifier({NAME: record}).verify(Signer(key, SELECTOR, DOMAIN).sign(padded)).status
    assert status == "failed: more than 1000 header fields"
    long_list = dkim.sign(
        plain,
        SELECTOR.encode(),
        DOMAIN.encode(),
        key.material,
        signature_algorithm=b"ed25519-sha256",
        include_headers=[b"from"] + [b"pad"] * 400,
    )
    status = Verifier({NAME: record}).verify(long_list + plain).status
    assert status == "failed: malformed signature: h= names more than 300 headers"

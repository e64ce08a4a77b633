"""`mailbus keygen`: the printed options work as pasted, the private key file is the
owner's alone, and the private key reaches the terminal only when asked."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest
from mailbus.cli import main
from mailbus.email_message import Email, to_bytes
from mailbus.options import options_from_mapping
from mailbus.signing.gate import SignatureGate, signer_from_sections


def test_keygen_prints_options_that_sign_and_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "robot.key"
    assert (
        main(["keygen", "--domain", "Robots.Example", "--selector", "lab", "--out", str(key_file)])
        == 0
    )
    out = capsys.readouterr().out
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    private = key_file.read_text().strip()
    assert private not in out
    pasted = tomllib.loads(out)
    assert pasted["signing"]["private-key-file"] == str(key_file)
    assert "lab._domainkey.robots.example. IN TXT" in out
    options = options_from_mapping(
        {"signing": {**pasted["signing"], "require-signature": True}}, {}
    )
    signer = signer_from_sections(options.sections)
    gate = SignatureGate.from_sections(options.sections)
    assert signer is not None and gate is not None
    email = Email(subject="t", body="b", sender="robot@robots.example")
    verdict = gate.verifier.verify(signer.sign(to_bytes(email)))
    assert verdict.status == "verified"
    gate.close()


def test_keygen_refuses_to_overwrite_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "robot.key"
    key_file.write_text("keep me")
    assert main(["keygen", "--domain", "robots.example", "--out", str(key_file)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert key_file.read_text() == "keep me"
    assert main(["keygen", "--domain", "robots.example", "--out", str(key_file), "--force"]) == 0
    assert key_file.read_text() != "keep me"


def test_keygen_private_key_to_stdout_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["keygen", "--domain", "robots.example", "--private-key-to-stdout"]) == 0
    private, _, table = capsys.readouterr().out.partition("\n\n")
    assert list(tmp_path.iterdir()) == []  # no file written
    pasted = tomllib.loads(table)
    assert pasted["signing"]["private-key-env"] == "MAILBUS_SIGNING_KEY"
    config = {"signing": pasted["signing"]}
    signer = signer_from_sections(
        options_from_mapping(config, {}).sections, {"MAILBUS_SIGNING_KEY": private.strip()}
    )
    assert signer is not None


def test_keygen_refuses_a_bad_domain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keygen", "--domain", "not a domain"]) == 2
    assert "not a valid DNS name" in capsys.readouterr().err

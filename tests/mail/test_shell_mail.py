"""`mailbus topic pub/echo/list` and `participant list` over the real mail stack
(Dovecot, Postfix or the LMTP relay), each a subprocess reading a TOML file with no
password in it (the password from MAILBUS_PASSWORD, as a user would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mailbus.stacks.mailstack import MailStack, User
from query_cases import BODIES, FIELD_CASES, WHERE_CASES

pytestmark = pytest.mark.mailstack

MAILBUS = [sys.executable, "-m", "mailbus"]
WAIT_S = 60.0


def write_config(path: Path, stack: MailStack, user: User) -> Path:
    path.write_text(
        "\n".join(
            [
                'transport = "email"',
                f'url-smtp = "{stack.smtps_url}"',
                f'url-imap = "{stack.imaps_url}"',
                f'username = "{user.address}"',
                f'ca-file = "{stack.ca_file}"',
                "polling-period-ms = 10",
                "[recipients]",
                f'to = ["{user.address}"]',
                "[mail]",
                "reconnect-max-s = 0.5",
                # From the inbox's start: what was published before the echo began counts.
                "start-uid = 1",
                "",
            ]
        )
    )
    return path


def mailbus_run(config: Path, password: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAILBUS_PASSWORD": password}
    env.pop("MAILBUS_CONFIG_FILE", None)
    return subprocess.run(
        [*MAILBUS, *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=WAIT_S * 2,
        env=env,
    )


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_pub_then_echo_where_and_field_over_mail(
    smtp_stack: MailStack, user: User, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "mailbus.toml", smtp_stack, user)
    assert user.password not in config.read_text()
    for body in BODIES:
        published = mailbus_run(config, user.password, "topic", "pub", "lab/t", body)
        assert published.returncode == 0, published.stderr
    where, expected = WHERE_CASES[3]  # two of the four
    echoed = mailbus_run(
        config,
        user.password,
        "topic",
        "echo",
        "lab/*",
        "--where",
        where,
        "--json",
        "--count",
        str(len(expected)),
        "--seconds",
        str(WAIT_S),
    )
    assert echoed.returncode == 0, echoed.stderr
    assert [line["body"] for line in json_lines(echoed.stdout)] == [BODIES[i] for i in expected]
    path, values = FIELD_CASES[0]
    field = mailbus_run(
        config,
        user.password,
        "topic",
        "echo",
        "lab/t",
        "--field",
        path,
        "--json",
        "--count",
        str(sum(v is not None for v in values)),
        "--seconds",
        str(WAIT_S),
    )
    assert field.returncode == 0, field.stderr
    # A message without the field is skipped (said on stderr), never printed as null.
    assert [line["value"] for line in json_lines(field.stdout)] == [
        v for v in values if v is not None
    ]
    listed = mailbus_run(config, user.password, "topic", "list", "--counts", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {"topic": "lab/t", "count": len(BODIES)} in json_lines(listed.stdout)


def test_a_wrong_password_is_a_usage_error_without_a_traceback(
    smtp_stack: MailStack, user: User, tmp_path: Path
) -> None:
    """The server answered and refused: the options need fixing (exit 2), not a dead
    server (docs/shell.md)."""
    config = write_config(tmp_path / "mailbus.toml", smtp_stack, user)
    done = mailbus_run(config, "not-the-password", "topic", "echo", "lab/t", "--seconds", "5")
    assert done.returncode == 2, done.stderr
    assert "check username and password" in done.stderr
    assert "is the server running" not in done.stderr
    assert "Traceback" not in done.stderr


def test_service_hz_and_participants_over_mail_with_the_demo_running(
    smtp_stack: MailStack, user: User, tmp_path: Path
) -> None:
    """The demo as a process on the same account (announcing itself), and the service,
    rate and participant commands against it as a user runs them."""
    demo_config = write_config(tmp_path / "demo.toml", smtp_stack, user)
    demo_config.write_text(
        demo_config.read_text()
        .replace("start-uid = 1\n", "")
        .replace("polling-period-ms = 10", "polling-period-ms = 10\nannounce-period-s = 1.0")
    )
    config = write_config(tmp_path / "tool.toml", smtp_stack, user)
    env = {**os.environ, "MAILBUS_PASSWORD": user.password}
    env.pop("MAILBUS_CONFIG_FILE", None)
    demo = subprocess.Popen(
        [*MAILBUS, "--config", str(demo_config), "demo"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        call = mailbus_run(
            config,
            user.password,
            "service",
            "call",
            "demo/add",
            "[1, 2, 3]",
            "--json",
            "--timeout",
            str(WAIT_S),
            # The demo reads only mail that comes after it connects: call once it is there.
            "--wait",
            str(WAIT_S),
        )
        assert call.returncode == 0, call.stderr
        [answer] = json_lines(call.stdout)
        assert json.loads(str(answer["response"])) == {"sum": 6}
        rate = mailbus_run(
            config, user.password, "topic", "hz", "robot/pose", "--json", "--seconds", "4"
        )
        assert rate.returncode == 0, rate.stderr
        assert all(float(str(r["rate_hz"])) > 0 for r in json_lines(rate.stdout))
        people = mailbus_run(
            config, user.password, "participant", "list", "--json", "--seconds", "4"
        )
        found = json_lines(people.stdout)
        assert any(p["transport"] == "email" and p["entities"] for p in found), found
    finally:
        demo.terminate()
        demo.wait(WAIT_S)


def test_pub_refuses_what_the_readers_would_skip(
    smtp_stack: MailStack, user: User, tmp_path: Path
) -> None:
    """A mail over `[mail] max-message-bytes` would be sent, then skipped by every
    reader: `topic pub` refuses it before sending, naming the limit (exit 1)."""
    config = write_config(tmp_path / "mailbus.toml", smtp_stack, user)
    config.write_text(config.read_text() + "max-message-bytes = 3000\n")
    done = mailbus_run(config, user.password, "topic", "pub", "lab/big", "x" * 5000)
    assert done.returncode == 1, done.stderr
    assert "published" not in done.stdout and "Traceback" not in done.stderr
    assert "limit of 3,000 bytes (mail.max-message-bytes" in done.stderr
    small = mailbus_run(config, user.password, "topic", "pub", "lab/big", "x" * 500)
    assert small.returncode == 0, small.stderr

from pathlib import Path

import pytest
from mailbus import ConfigError, load_options

EMAIL_CONFIG = """
transport = "email"
url-smtp = "smtps://mail.example.com:465"
url-imap = "imaps://mail.example.com:993"
username = "bus@example.com"
polling-period-ms = 50
[recipients]
to = ["bus@example.com"]
bcc = ["audit@example.com"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mailbus.toml"
    path.write_text(text)
    return path


def test_defaults_are_in_process() -> None:
    options = load_options(environ={})
    assert options.transport == "inprocess" and options.polling_period_ms == 10.0


def test_file_and_password_from_environment(tmp_path: Path) -> None:
    path = write(tmp_path, EMAIL_CONFIG)
    options = load_options(path, environ={"MAILBUS_PASSWORD": "s3cret"})
    assert options.password == "s3cret"
    assert options.recipients.to == ("bus@example.com",)
    assert options.recipients.bcc == ("audit@example.com",)
    assert options.polling_period_ms == 50.0
    assert options.address == "bus@example.com"
    assert "s3cret" not in repr(options)


def test_config_file_from_environment_and_env_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, 'password = "infile"\n' + EMAIL_CONFIG)
    options = load_options(
        environ={"MAILBUS_CONFIG_FILE": str(path), "MAILBUS_POLLING_PERIOD_MS": "5"}
    )
    assert options.password == "infile" and options.polling_period_ms == 5.0


def test_reference_intraprocess_switch(tmp_path: Path) -> None:
    assert load_options(write(tmp_path, "intraprocess = true\n"), environ={}).transport == (
        "inprocess"
    )


@pytest.mark.parametrize(
    ("text", "env", "key"),
    [
        (EMAIL_CONFIG, {}, "password"),
        (
            EMAIL_CONFIG.replace('username = "bus@example.com"', ""),
            {"MAILBUS_PASSWORD": "p"},
            "username",
        ),
        ('transport = "pigeon"\n', {}, "transport"),
        ('polling-period-ms = "fast"\n', {}, "polling-period-ms"),
        ("polling-period-ms = -1\n", {}, "polling-period-ms"),
        ("colour = 3\n", {}, "colour"),
        ('[outbx]\ndir = "/tmp/x"\n', {}, "outbx"),
        ('[recipients]\nto = ["not an address"]\n', {}, "recipients.to"),
        ("[recipients]\nfax = []\n", {}, "recipients.fax"),
        ('intraprocess = "yes"\n', {}, "intraprocess"),
        ("", {"MAILBUS_TLS_VERIFY": "maybe"}, "MAILBUS_TLS_VERIFY"),
        (
            EMAIL_CONFIG.replace("smtps://mail", "smtps://bus:pw@mail"),
            {"MAILBUS_PASSWORD": "p"},
            "url-smtp",
        ),
        (EMAIL_CONFIG.replace("imaps://", "http://"), {"MAILBUS_PASSWORD": "p"}, "url-imap"),
        ("this is = not toml [", {}, "MAILBUS_CONFIG_FILE"),
    ],
)
def test_bad_options_name_the_key(tmp_path: Path, text: str, env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_options(write(tmp_path, text), environ=env)
    assert caught.value.key == key
    assert key in str(caught.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_options(tmp_path / "absent.toml", environ={})


def test_unknown_tables_are_kept_for_other_parts(tmp_path: Path) -> None:
    options = load_options(write(tmp_path, "[postoffice]\nport = 8228\n"), environ={})
    assert options.sections["postoffice"] == {"port": 8228}


def test_passwords_in_tables_stay_out_of_the_repr(tmp_path: Path) -> None:
    path = write(tmp_path, '[postoffice]\npassword = "hunter2"\n')
    options = load_options(path, environ={"MAILBUS_PASSWORD": "s3cret"})
    assert "hunter2" not in repr(options) and "s3cret" not in repr(options)

"""The bus and system fixtures: transports, the marker, processes started and waited
for through their announcements, and what a failure shows of them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from inner import run
from mailbus.testing.buses import PostOfficeDaemon, toml_text

PARTICIPANT = """
import signal, sys, threading, mailbus
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print("echo starting", flush=True)
with mailbus.Context() as ctx:
    server = ctx.server("echo")
    while not stop.is_set():
        request = mailbus.wait_for_request(server, 0.1)
        if request is not None:
            server.send_response(request, request.body.upper())
"""


@pytest.mark.slow
def test_the_marker_runs_a_test_once_per_transport(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
@pytest.mark.mailbus_transports("inprocess", "postoffice")
def test_both(bus, expect):
    seen = expect.topic("t", where={"n": 1})
    bus.publisher("t").publish(json.dumps({"n": 1}))
    seen.wait()
    print("ran on", bus.transport, bus.context.transport_name)
""",
        "-v",
        "-s",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*test_both?inprocess? ran on inprocess inprocess*",
            "*test_both?postoffice? ran on postoffice postoffice*",
        ]
    )


@pytest.mark.slow
def test_an_unknown_transport_in_the_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
@pytest.mark.mailbus_transports("carrier-pigeon")
def test_x(bus):
    pass
""",
    )
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown transport 'carrier-pigeon'*"])


@pytest.mark.slow
def test_a_process_on_postoffice_is_started_waited_for_and_stopped(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
def test_echo(bus, system, expect):
    echo = system.start("echo_server.py", ready=["server:echo"])
    calls = expect.service("echo").answered(1).responds(where=lambda o: o.body == "HI")
    assert bus.client("echo").call("hi", timeout=10).body == "HI"
    calls.wait()
    assert echo.running
    system.stop()
    assert not echo.running
""",
        "--mailbus-transport=postoffice",
        echo_server__py=PARTICIPANT,
    )
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_a_failed_test_shows_the_output_of_the_system(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_echo(bus, system):
    system.start("echo_server.py", ready=["server:echo"])
    assert bus.client("echo").call("hi", timeout=10).body == "hi"
""",
        "--mailbus-transport=postoffice",
        echo_server__py=PARTICIPANT,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*mailbus system: echo_server (last lines)*", "echo starting"])


@pytest.mark.slow
def test_a_process_that_dies_before_it_is_ready_is_reported(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_dies(system):
    system.start("crash.py", ready=["server:echo"])
""",
        "--mailbus-transport=postoffice",
        crash__py="import sys\nprint('cannot find my config', flush=True)\nsys.exit(3)\n",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*participant 'crash' ended before it was ready*", "*cannot find my config*"]
    )


@pytest.mark.slow
def test_a_process_that_never_announces_the_entity_is_reported(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
def test_wrong_name(system):
    system.start("echo_server.py", ready=["server:not-echo"], timeout=3)
""",
        "--mailbus-transport=postoffice",
        echo_server__py=PARTICIPANT,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*participant 'echo_server' did not announce server:not-echo within 3 s "
            "(it announced server:echo)*"
        ]
    )


@pytest.mark.slow
def test_a_command_on_the_in_process_bus_is_refused_with_what_to_do(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
def test_cmd(system):
    system.start(["sleep", "5"], name="sleeper")
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*participant 'sleeper' is a process, and a process cannot join the in-process bus*"]
    )


@pytest.mark.slow
def test_a_system_file_starts_its_participants_in_order(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_file(bus, system):
    started = system.from_file("system.toml")
    assert [p.name for p in started] == ["echo"]
    assert bus.client("echo").call("a", timeout=10).body == "A"

def test_bad_file(system):
    with pytest.raises(ValueError, match="participant 1 has no command"):
        system.from_file("bad.toml")
""",
        "--mailbus-transport=postoffice",
        echo_server__py=PARTICIPANT,
        system__toml='[[participant]]\nname = "echo"\ncommand = ["echo_server.py"]\n'
        'ready = ["server:echo"]\n',
        bad__toml='[[participant]]\nname = "x"\n',
    )
    result.assert_outcomes(passed=2)


@pytest.mark.slow
def test_an_options_file_runs_the_bus_on_the_users_system(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
def test_cfg(bus):
    assert bus.context.options.polling_period_ms == 50
""",
        "--mailbus-config=mine.toml",
        mine__toml='transport = "inprocess"\npolling-period-ms = 50\n',
    )
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_a_postoffice_options_file_gives_every_participant_its_own_box(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    daemon = PostOfficeDaemon(tmp_path / "po")
    try:
        (pytester.path / "lab.toml").write_text(
            'transport = "postoffice"\n[postoffice]\nhost = "127.0.0.1"\n'
            f'port = {daemon.port}\nbox = "lab.me"\npassword = "{daemon.password}"\n'
        )
        result = run(
            pytester,
            """
def test_echo(bus, system):
    system.start("echo_server.py", ready=["server:echo"])
    assert bus.client("echo").call("x", timeout=10).body == "X"
    assert bus.context.options.sections["postoffice"]["box"].startswith("lab.test")
    copy = (system.directory / "echo_server.toml").read_text()
    assert "password" not in copy and 'box = "lab.echoserver' in copy.replace('"box"', "box")
""",
            "--mailbus-config=lab.toml",
            echo_server__py=PARTICIPANT,
        )
    finally:
        daemon.stop()
    result.assert_outcomes(passed=1)


def test_toml_text_writes_what_tomllib_reads() -> None:
    mapping = {"a": 1, "name": 'x"y', "t": {"b": [1, "z"], "u": {"c": True}}, "s": {"k": 2.5}}
    assert tomllib.loads(toml_text(mapping)) == mapping


def test_a_python_module_command_is_read_as_such_and_a_missing_one_named() -> None:
    from mailbus.testing.system import ParticipantError, module_function, python_module

    assert python_module(["python", "-m", "mailbus.demo"]) == "mailbus.demo"
    assert python_module(["python", "-m", "mailbus.demo", "--seconds", "1"]) is None
    assert python_module(["python3", "-m", "mailbus.demo"]) is None
    assert python_module(["demo.py"]) is None
    with pytest.raises(ParticipantError, match=r"no participant module nosuch\.module"):
        module_function("nosuch.module")
    with pytest.raises(ParticipantError, match=r"mailbus\.names has no run"):
        module_function("mailbus.names")

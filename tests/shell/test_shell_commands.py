"""`mailbus topic|service|participant` as a user runs them: real subprocesses against a
real PostOffice daemon, with the demo running as another process on it (and, where the
demo runs inside the command, in-process with --demo). Asserts on what is printed and
on the exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mailbus
import pytest
from query_cases import BODIES, FIELD_CASES, WHERE_CASES
from waiting import eventually

from shell.shell_system import MAILBUS, WAIT_S, System, json_lines


@pytest.fixture
def system(tmp_path: Path) -> Iterator[System]:
    made = System(tmp_path)
    yield made
    made.daemon.stop()


@pytest.fixture
def demo(system: System) -> Iterator[System]:
    """The demo system running as its own process on the daemon, announcing itself."""
    config = system.config("lab.demo", announce=0.5)
    process = subprocess.Popen(
        [*MAILBUS, "--config", str(config), "demo"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    eventually(lambda: system.has_box("lab.demo"), WAIT_S, "the demo's mailbox")
    yield system
    process.terminate()
    process.wait(WAIT_S)


def test_echo_prints_a_field_of_the_demo_traffic(demo: System) -> None:
    done = demo.run(
        "lab.tool",
        "topic",
        "echo",
        "robot/pose",
        "--field",
        "x",
        "--count",
        "3",
        "--json",
        "--seconds",
        str(WAIT_S),
    )
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    assert len(lines) == 3
    assert all(line["topic"] == "robot/pose" and line["field"] == "x" for line in lines)
    assert all(isinstance(line["value"], float) and -1 <= line["value"] <= 1 for line in lines)


@pytest.mark.slow
def test_echo_that_sees_nothing_says_so_and_exits_1(demo: System) -> None:
    done = demo.run("lab.tool", "topic", "echo", "robot/pose", "--where", "x>2", "--seconds", "2")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "no message on robot/pose within 2 s" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("where", "expected"), WHERE_CASES)
def test_echo_where_picks_what_find_picks(
    system: System, where: str, expected: tuple[int, ...]
) -> None:
    echo = system.start(
        "lab.tool",
        "topic",
        "echo",
        "lab/t",
        "--where",
        where,
        "--json",
        "--count",
        str(len(expected)),
        "--seconds",
        str(WAIT_S),
    )
    eventually(lambda: system.has_box("lab.tool"), WAIT_S, "the echo's mailbox")
    with mailbus.Context(system.options("lab.pub")) as ctx:
        publisher = ctx.publisher("lab/t")
        for body in BODIES:
            publisher.publish(body)
    out, err = echo.communicate(timeout=WAIT_S * 2)
    assert echo.returncode == 0, err
    assert [line["body"] for line in json_lines(out)] == [BODIES[i] for i in expected]


@pytest.mark.slow
def test_echo_field_reads_what_find_reads(system: System) -> None:
    """Values as Find reads them; a message without the field is skipped and said so
    on stderr, never printed as null."""
    echoes = {
        path: system.start(
            f"lab.f{n}",
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
        for n, (path, values) in enumerate(FIELD_CASES)
    }
    for n in range(len(FIELD_CASES)):
        eventually(lambda n=n: system.has_box(f"lab.f{n}"), WAIT_S, "an echo's mailbox")
    with mailbus.Context(system.options("lab.pub")) as ctx:
        for body in BODIES:
            ctx.publisher("lab/t").publish(body)
    for path, values in FIELD_CASES:
        out, err = echoes[path].communicate(timeout=WAIT_S * 2)
        assert echoes[path].returncode == 0, err
        assert [line["value"] for line in json_lines(out)] == [v for v in values if v is not None]
        skipped_before_the_last = None in values[: max(i for i, v in enumerate(values) if v)]
        assert (f"a message on lab/t has no field {path} (skipped)" in err) is (
            skipped_before_the_last
        )


@pytest.mark.slow
def test_list_and_participants_from_traffic_and_announcements(demo: System) -> None:
    topics = demo.run("lab.tool", "topic", "list", "--counts", "--seconds", "3")
    assert topics.returncode == 0, topics.stderr
    names = {line.split()[0] for line in topics.stdout.splitlines()}
    assert {"robot/pose", "sensors/temperature"} <= names
    services = demo.run("lab.tool", "service", "list", "--json", "--seconds", "3")
    assert {"service": "demo/add"} in json_lines(services.stdout)
    people = demo.run("lab.tool", "participant", "list", "--json", "--seconds", "3")
    found = json_lines(people.stdout)
    assert any(p["transport"] == "postoffice" and p["entities"] for p in found), found
    gid = next(str(p["gid"]) for p in found if p["entities"])
    info = demo.run("lab.tool", "participant", "info", gid[:10], "--json", "--seconds", "3")
    [detail] = json_lines(info.stdout)
    kinds = {(e["kind"], e["name"]) for e in detail["entities"]}  # type: ignore[union-attr]
    assert ("server", "demo/add") in kinds and ("publisher", "robot/pose") in kinds
    topic = demo.run("lab.tool", "topic", "info", "robot/pose", "--json", "--seconds", "3")
    assert len(json_lines(topic.stdout)[0]["publishers"]) == 1  # type: ignore[arg-type]


@pytest.mark.slow
def test_service_call_answers_times_out_and_reports_errors(demo: System) -> None:
    answered = demo.run("lab.tool", "service", "call", "demo/add", "[1, 2, 3]", "--json")
    assert answered.returncode == 0, answered.stderr
    [line] = json_lines(answered.stdout)
    assert line["status"] == "answered" and json.loads(str(line["response"])) == {"sum": 6}
    error = demo.run("lab.tool", "service", "call", "demo/add", '"nonsense"')
    assert error.returncode == 1
    assert "demo/add answered with an error" in error.stderr
    silent = demo.run("lab.tool", "service", "call", "no/one", "{}", "--timeout", "1")
    assert silent.returncode == 1
    assert "no response from no/one within 1 s" in silent.stderr
    # --wait: called once the server has announced itself; refused when none does.
    waited = demo.run("lab.tool", "service", "call", "demo/add", "[4]", "--wait", "30", "--json")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(str(json_lines(waited.stdout)[0]["response"])) == {"sum": 4}
    unserved = demo.run("lab.tool", "service", "call", "no/one", "{}", "--wait", "1", "--json")
    assert unserved.returncode == 1
    assert json_lines(unserved.stdout) == [{"service": "no/one", "status": "no_server"}]
    assert "no server of no/one announced itself within 1 s" in unserved.stderr


@pytest.mark.slow
def test_service_echo_pairs_requests_with_responses(demo: System) -> None:
    done = demo.run(
        "lab.tool", "service", "echo", "demo/*", "--count", "2", "--json", "--seconds", str(WAIT_S)
    )
    assert done.returncode == 0, done.stderr
    for line in json_lines(done.stdout):
        assert line["service"] == "demo/add" and line["status"] == "answered"
        assert json.loads(str(line["response"]))["sum"] == sum(json.loads(str(line["request"])))
        assert isinstance(line["latency_ms"], float)


@pytest.mark.slow
def test_hz_bw_and_delay_report(demo: System) -> None:
    for action, key in (("hz", "rate_hz"), ("bw", "bytes_per_s"), ("delay", "p50_ms")):
        done = demo.run("lab.tool", "topic", action, "robot/pose", "--json", "--seconds", "3")
        assert done.returncode == 0, done.stderr
        reports = json_lines(done.stdout)
        assert reports and all(float(r[key]) > 0 for r in reports), (action, reports)


def test_pub_is_received(system: System) -> None:
    with mailbus.Context(system.options("lab.sub")) as ctx:
        subscription = ctx.subscription("lab/cmd")
        done = system.run("lab.tool", "topic", "pub", "lab/cmd", '{"go": true}', "--times", "3")
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("published lab/cmd <") == 3
        bodies = [mailbus.wait_for_message(subscription, WAIT_S) for _ in range(3)]
    assert [m.body for m in bodies if m is not None] == ['{"go": true}'] * 3


@pytest.mark.slow
def test_errors_say_what_to_do_without_a_traceback(system: System, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('transport = "postoffice"\n[postoffice]\nbox = "x"\n')
    done = subprocess.run(
        [*MAILBUS, "topic", "list", "--config", str(bad)], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "postoffice.password" in done.stderr
    unreachable = system.config("lab.tool").read_text().replace(str(system.port), "1")
    (tmp_path / "down.toml").write_text(unreachable)
    down = subprocess.run(
        [*MAILBUS, "topic", "list", "--config", str(tmp_path / "down.toml")],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert down.returncode == 3 and "Traceback" not in down.stderr
    assert "is the server running" in down.stderr
    usage = subprocess.run(
        [*MAILBUS, "topic", "echo", "x", "--where", "hot", "--demo"], capture_output=True, text=True
    )
    assert usage.returncode == 2 and "'hot' is not a condition" in usage.stderr


def test_a_pipe_closed_early_ends_quietly() -> None:
    done = subprocess.run(
        f"{sys.executable} -m mailbus topic echo --demo robot/pose | head -n 2; "
        'echo "status ${PIPESTATUS[0]}" >&2',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert len(done.stdout.splitlines()) == 2
    assert "status 0" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_ends_with_a_one_line_summary() -> None:
    process = subprocess.Popen(
        [*MAILBUS, "topic", "echo", "--demo", "robot/pose"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("robot/pose ")  # it is receiving
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0
    assert err.startswith("topic echo: received ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_commands_import_nothing_heavy() -> None:
    code = (
        "import sys; from mailbus.cli import main\n"
        "try:\n    main(['topic', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'polars', 'pyarrow', 'textual'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip().endswith("[]"), done.stdout + done.stderr
    assert (
        "mailbus topic echo 'sensors/*' --where"
        in subprocess.run(
            [*MAILBUS, "topic", "echo", "--help"], capture_output=True, text=True
        ).stdout
    )


def test_json_lines_on_the_demo_inside_the_command() -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [*MAILBUS, "topic", "echo", "--demo", "sensors/*", "--count", "2", "--json", "--stats"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=env,
    )
    assert done.returncode == 0
    assert [line["topic"] for line in json_lines(done.stdout)] == ["sensors/temperature"] * 2
    stats = json.loads(done.stderr.strip().splitlines()[-1])
    assert stats["received"] == 2 and stats["exit"] == 0


@pytest.mark.slow
def test_service_echo_reports_a_call_nobody_answers(system: System) -> None:
    echo = system.start(
        "lab.watch", "service", "echo", "lab/*", "--timeout", "1", "--count", "1", "--json"
    )
    eventually(lambda: system.has_box("lab.watch"), WAIT_S, "the echo's mailbox")
    call = system.run("lab.tool", "service", "call", "lab/nobody", '{"q": 1}', "--timeout", "2")
    assert call.returncode == 1
    out, err = echo.communicate(timeout=WAIT_S)
    assert echo.returncode == 0, err
    [line] = json_lines(out)
    assert line["service"] == "lab/nobody" and line["status"] == "timed out"
    assert line["request"] == '{"q": 1}' and line["response"] is None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (("topic", "list"), {"topic": "robot/pose"}),
        (("topic", "info", "robot/pose"), {"topic": "robot/pose"}),
        (("topic", "hz", "robot/pose"), {"topic": "robot/pose"}),
        (("topic", "bw", "robot/pose"), {"topic": "robot/pose"}),
        (("topic", "delay", "robot/pose"), {"topic": "robot/pose"}),
        (("service", "list"), {"service": "demo/add"}),
        (("service", "info", "demo/add"), {"service": "demo/add"}),
        (("service", "echo", "demo/*"), {"service": "demo/add", "status": "answered"}),
        (("participant", "list"), {"transport": "inprocess", "entities": 6}),
    ],
)
@pytest.mark.slow
def test_each_command_in_process_on_the_demo(
    command: tuple[str, ...], expected: dict[str, object]
) -> None:
    done = subprocess.run(
        [*MAILBUS, *command, "--demo", "--json", "--seconds", "3"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    assert any(expected.items() <= line.items() for line in lines), lines

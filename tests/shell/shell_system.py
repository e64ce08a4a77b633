"""A PostOffice daemon to run `mailbus topic|service|participant` against, as users
do: real subprocesses, a config file per box."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import mailbus
from mailbus.options import options_from_mapping
from mailbus.postoffice.server import ServerThread
from mailbus.trace import Tracer
from postoffice.conftest import daemon_config

RUNNER = Path(__file__).with_name("fork_runner.py")
PASSWORD = "Zq9-letter-K3y-long"
MAILBUS = [sys.executable, "-m", "mailbus"]
WAIT_S = 30.0


class System:
    """A PostOffice daemon, a config file per box, and helpers to run the command."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.daemon = ServerThread(daemon_config(tmp_path), Tracer()).start()
        self.port = self.daemon.port

    def config(self, box: str, announce: float = 0.0) -> Path:
        path = self.tmp / f"{box}.toml"
        lines = [
            'transport = "postoffice"',
            f"announce-period-s = {announce}" if announce else "",
            "[postoffice]",
            f'port = {self.port}\nbox = "{box}"\npassword = "{PASSWORD}"',
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    def boxes(self) -> list[str]:
        return self.daemon.call(lambda: list(self.daemon.office.boxes))

    def has_box(self, box: str) -> bool:
        """`box`, or the box of its own a shell command on `box`'s options makes
        (`<box>sh<pid>x<random>`), exists."""
        own = re.compile(re.escape(box) + r"(sh[0-9]+x[0-9a-f]+)?")
        return any(own.fullmatch(name) for name in self.boxes())

    def options(self, box: str) -> mailbus.Options:
        table = {"port": self.port, "box": box, "password": PASSWORD}
        return options_from_mapping({"transport": "postoffice", "postoffice": table})

    def run(
        self,
        box: str | Path,
        *args: str,
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`mailbus ARGS --config` the options of `box` (or that options file)."""
        config = box if isinstance(box, Path) else self.config(box)
        return subprocess.run(
            [*MAILBUS, *args, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )

    def start(
        self, box: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*MAILBUS, *args, "--config", str(self.config(box))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def own_boxes(self, box: str) -> list[str]:
        """The boxes shell commands on `box`'s options made for themselves."""
        own = re.compile(re.escape(box) + r"sh[0-9]+x[0-9a-f]+")
        return [name for name in self.boxes() if own.fullmatch(name)]

    def letters_in(self, box: str) -> int:
        """Letters waiting in `box`, stored or being stored."""
        return self.daemon.call(
            lambda: (
                len(self.daemon.office.boxes[box].letters) + self.daemon.office.boxes[box].pending
            )
        )


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_many(command_lines: list[list[str]], timeout: float = WAIT_S * 4) -> list[dict[str, Any]]:
    """Each `mailbus` command line in a process of its own, all at once (fork_runner:
    one interpreter start for all), as {"code", "stdout", "stderr"}."""
    done = subprocess.run(
        [sys.executable, str(RUNNER)],
        input=json.dumps(command_lines),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results

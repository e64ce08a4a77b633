"""`mailbus notebook` for real: JupyterLab started by the command, the live notebook it
wrote run in Debian's chromium (Playwright); on the demo, and on a PostOffice system,
where the notebook also shows the whole workbench served in a cell (an IFrame)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Frame, Page, Route
from test_browser import POLL_S, free_port, kernel_idle, lab, lab_env, topic_counts
from waiting import eventually

pytestmark = pytest.mark.slow
PASSWORD = "notebook-pw"
# textual-serve draws on a canvas: the page's xterm.js terminal is kept for the test to read.
TERMINAL_OPENED = "this.terminal.open(e),"
TERMINAL_HOOK = (
    "this.terminal.open(e),"
    "(window.__mailbusTerminals=window.__mailbusTerminals||[]).push(this.terminal),"
)
SCREEN_JS = """() => {
    const terminal = (window.__mailbusTerminals || [])[0];
    if (!terminal) return "";
    const buffer = terminal.buffer.active, lines = [];
    for (let row = 0; row < terminal.rows; row++) {
        const line = buffer.getLine(buffer.viewportY + row);
        lines.push(line ? line.translateToString(true) : "");
    }
    return lines.join("\\n");
}"""


def run_all(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-CodeCell")
    eventually(lambda: kernel_idle(url), 60, "the kernel to be idle", longest_pause=POLL_S)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def no_errors(page: Page) -> None:
    errors = page.locator("[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.all_inner_texts()


def notebook_command(root: Path, port: int, *config: str) -> list[str]:
    return [
        *(sys.executable, "-m", "mailbus_workbench", "notebook", *config),
        *("--no-browser", "--port", str(port), "--dir", str(root)),
    ]


def test_mailbus_notebook_opens_jupyterlab_on_a_live_monitor_of_the_demo(
    chromium_page: Page, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    env = lab_env(tmp_path, JUPYTER_TOKEN=token)
    page = chromium_page
    with lab(notebook_command(root, port), env, port, token) as base:
        assert (root / "mailbus-live.ipynb").exists()
        url = f"{base}/lab/tree/mailbus-live.ipynb?token={token}"
        run_all(page, url)
        eventually(
            lambda: {"robot/pose", "sensors/temperature"} <= set(topic_counts(page)),
            60,
            "the demo's topics in the monitor",
            longest_pause=POLL_S,
        )
        eventually(
            lambda: page.locator(".mailbus-monitor .mailbus-chart-box").count() == 3,
            30,
            "the watched fields' charts and the rates",
            longest_pause=POLL_S,
        )
        eventually(lambda: kernel_idle(url), 60, "the cells to finish", longest_pause=POLL_S)
        no_errors(page)
        assert "demo/add: answered" in page.locator(".mailbus-result").first.inner_text()
        # The README's picture: a topic inspected, ten seconds of charts, a value hovered.
        page.locator(".mailbus-monitor tr.mailbus-topic[data-topic='robot/pose']").click()
        eventually(
            lambda: topic_counts(page)["robot/pose"] > 200,
            60,
            "ten seconds of robot/pose",
            longest_pause=POLL_S,
        )
        chart = page.locator(".mailbus-monitor svg.mailbus-chart").first
        # The chart is drawn again at each update: wait for one that is on the page.
        bounds = eventually(chart.bounding_box, 10, "the chart drawn", longest_pause=POLL_S)
        page.mouse.move(bounds["x"] + bounds["width"] * 0.8, bounds["y"] + bounds["height"] / 3)
        hover = page.locator(".mailbus-monitor .mailbus-hover").first
        eventually(lambda: " = " in hover.inner_text(), 10, "a hovered value")
        shots = Path(os.environ.get("MAILBUS_NOTEBOOK_SHOTS") or tmp_path)
        page.locator(".mailbus-monitor").first.screenshot(path=str(shots / "notebook-monitor.png"))


def start_daemon(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    daemon = subprocess.Popen(
        [
            *(sys.executable, "-m", "mailbus", "postoffice", "serve", "--port", "0"),
            *("--hash-cost", "8", "--store", str(tmp_path / "po" / "postoffice.db")),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert daemon.stdout is not None
    line = daemon.stdout.readline()  # the daemon's first line: where it listens
    match = re.search(rb"listening on 127\.0\.0\.1:(\d+)", line)
    if match is None:
        stop(daemon)
        raise AssertionError(f"the daemon did not start: {line!r}")
    return daemon, int(match.group(1))


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def config(path: Path, port: int, box: str) -> str:
    path.write_text(f'transport = "postoffice"\n[postoffice]\nport = {port}\nbox = "{box}"\n')
    return str(path)


def served_frame(page: Page) -> Frame | None:
    src = page.locator("iframe.mailbus-served").first.get_attribute("src") or "?"
    return next((f for f in page.frames if f.url.startswith(src)), None)


def terminal_text(page: Page) -> str:
    frame = served_frame(page)
    return str(frame.evaluate(SCREEN_JS)) if frame is not None else ""


def hook_terminal(route: Route) -> None:
    response = route.fetch()
    script = response.text()
    assert TERMINAL_OPENED in script, "textual-serve's script changed: update the hook"
    route.fulfill(response=response, body=script.replace(TERMINAL_OPENED, TERMINAL_HOOK))


def test_mailbus_notebook_on_a_postoffice_system_serves_the_workbench_in_a_cell(
    chromium_page: Page, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    env = lab_env(
        tmp_path,
        JUPYTER_TOKEN=token,
        MAILBUS_POSTOFFICE_PASSWORD=PASSWORD,
        MAILBUS_WORKBENCH_DIR=str(tmp_path / "workbench"),
        MAILBUS_CONFIG_FILE="",
    )
    daemon, po_port = start_daemon(tmp_path, env)
    demo = None
    try:
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mailbus",
                "--config",
                config(tmp_path / "d.toml", po_port, "lab.demo"),
                "demo",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        lab_config = config(tmp_path / "lab.toml", po_port, "lab.notebook")
        command = notebook_command(root, port, "--config", lab_config)
        page = chromium_page
        with lab(command, env, port, token) as base:
            assert (root / "mailbus-lab.ipynb").exists()
            page.route("**/textual.js", hook_terminal)
            url = f"{base}/lab/tree/mailbus-lab.ipynb?token={token}"
            run_all(page, url)
            eventually(
                lambda: page.locator("iframe.mailbus-served").count() > 0 and kernel_idle(url),
                90,
                "the cells to run",
                longest_pause=POLL_S,
            )
            no_errors(page)
            eventually(
                lambda: "sensors" in terminal_text(page),
                60,
                "the served workbench's topics in the cell",
                longest_pause=POLL_S,
            )
            eventually(
                lambda: "sensors/temperature" in topic_counts(page),
                30,
                "the system's topics in the notebook's own monitor",
                longest_pause=POLL_S,
            )
            screen = terminal_text(page)
            assert "Mailbus workbench" in screen and "postoffice" in screen, screen
            eventually(lambda: kernel_idle(url), 60, "the cells to finish", longest_pause=POLL_S)
            no_errors(page)
            page.screenshot(path=str(tmp_path / "served.png"))
    finally:
        if demo is not None:
            stop(demo)
        stop(daemon)
        stop_served_pages(tmp_path / "lab.toml")


def stop_served_pages(config_path: Path) -> None:
    """The served workbench of a page (a process in a session of its own) outlives
    JupyterLab: found by the options file it was given, it is ended here."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(config_path).encode() in argv and b"mailbus_workbench" in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)

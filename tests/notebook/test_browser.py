"""The live notebook in a real browser: JupyterLab on loopback, Playwright driving
Debian's chromium (no browser download) runs the whole notebook; the widget shows the
demo's topics with counts that increase, its chart draws, and so do the Altair charts."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright
from waiting import eventually

CHROMIUM = "/usr/bin/chromium"
POLL_S = 0.1  # JupyterLab and the browser are asked no more often than this
LIVE = Path(__file__).parents[2] / "sample_sessions" / "live.ipynb"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture
def jupyterlab(tmp_path: Path) -> Iterator[str]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-system-packages")
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(LIVE, root / "live.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        eventually(
            lambda: http_ok(f"{base}/api/status?token={token}"),
            60,
            "JupyterLab",
            longest_pause=POLL_S,
        )
        yield f"{base}/lab/tree/live.ipynb?token={token}"
    finally:
        server.send_signal(signal.SIGINT)  # Jupyter asks to confirm; a second one stops it
        time.sleep(0.3)  # the pause Jupyter's confirm prompt needs between the two signals
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


def kernel_idle(url: str) -> bool:
    base, _, query = url.partition("/lab/")
    token = query.rpartition("token=")[2]
    try:
        with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=2) as response:
            kernels = json.load(response)
    except OSError:
        return False
    return bool(kernels) and all(k["execution_state"] == "idle" for k in kernels)


def topic_counts(page: Page) -> dict[str, int]:
    rows = page.locator(".mailbus-monitor tr.mailbus-topic")
    counts: dict[str, int] = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        counts[row.get_attribute("data-topic") or ""] = int(
            row.locator(".mailbus-count").inner_text()
        )
    return counts


def test_the_live_notebook_shows_growing_topics_and_a_chart(
    jupyterlab: str, tmp_path: Path
) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(jupyterlab)
            page.wait_for_selector(".jp-Notebook .jp-CodeCell")
            eventually(
                lambda: kernel_idle(jupyterlab),
                60,
                "the notebook's kernel to be idle",
                longest_pause=POLL_S,
            )
            page.locator(".jp-CodeCell .jp-InputArea-editor").first.click()
            page.keyboard.press("Shift+Enter")  # the monitor's cell alone first
            page.wait_for_selector(".mailbus-monitor tr.mailbus-topic")
            expected = {"robot/pose", "sensors/temperature", "robot/log", "system/heartbeat"}

            def demo_topics() -> dict[str, int] | None:
                counts = topic_counts(page)  # robot/log comes in bursts: not waited for
                return counts if set(counts) >= expected - {"robot/log"} else None

            first = eventually(
                demo_topics, 30, "the demo's topics in the widget", longest_pause=POLL_S
            )
            eventually(
                lambda: topic_counts(page).get("robot/pose", 0) > first["robot/pose"],
                30,
                "robot/pose's count to grow",
                longest_pause=POLL_S,
            )
            points = page.locator(".mailbus-chart polyline.mailbus-series").first
            eventually(
                lambda: len((points.get_attribute("points") or "").split()) > 3,
                30,
                "a chart line",
                longest_pause=POLL_S,
            )
            page.locator(".mailbus-monitor tr.mailbus-topic[data-topic='robot/pose']").click()
            eventually(
                lambda: '"x"' in page.locator(".mailbus-latest").inner_text(),
                30,
                "robot/pose's latest message",
                longest_pause=POLL_S,
            )
            # Then the whole notebook (the monitor cell again, which replaces the first
            # monitor; a call, a ten-second recording, its analysis): the Altair charts
            # render through JupyterLab's own Vega renderer.
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            eventually(
                lambda: page.locator(".vega-embed canvas, .vega-embed svg").count() >= 2,
                90,
                "the notebook's Altair charts",
                longest_pause=POLL_S,
            )
            eventually(
                lambda: kernel_idle(jupyterlab), 60, "the notebook to finish", longest_pause=POLL_S
            )
            # Every code cell ran (the last ones assert on the live traffic), none failed.
            errors = page.locator("[data-mime-type='application/vnd.jupyter.stderr']")
            assert errors.count() == 0, errors.all_inner_texts()
            prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
            assert prompts and all(p.strip() not in ("[ ]:", "[*]:") for p in prompts), prompts
        finally:
            browser.close()

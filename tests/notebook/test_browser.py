"""The live notebook in a real browser: JupyterLab on loopback, Playwright driving
Debian's chromium (no browser download) runs the whole notebook; the widget shows the
demo's topics with counts that increase, its chart draws, and so do the Altair charts."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mailbus.stacks.loopback import free_port
from playwright.sync_api import Page
from waiting import eventually

POLL_S = 0.1  # JupyterLab and the browser are asked no more often than this
LIVE = Path(__file__).parents[2] / "sample_sessions" / "live.ipynb"
NO_VALUE = "\u2013"  # the widget's en dash: no value (yet, or any more)

pytestmark = pytest.mark.slow


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def lab_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Jupyter's directories in tmp_path, no news box, this user allowed (tests run as root)."""
    news = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    config = tmp_path / "config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"allow_root": True, "ip": "127.0.0.1"}})
    )
    return {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        **extra,
    }


@contextmanager
def lab(command: list[str], env: dict[str, str], port: int, token: str) -> Iterator[str]:
    """JupyterLab started by `command`; yields its base URL once it answers."""
    server = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        eventually(
            lambda: http_ok(f"{base}/api/status?token={token}"),
            60,
            "JupyterLab",
            longest_pause=POLL_S,
        )
        yield base
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


@pytest.fixture
def jupyterlab(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(LIVE, root / "live.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with lab(command, lab_env(tmp_path), port, token) as base:
        yield f"{base}/lab/tree/live.ipynb?token={token}"


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


def shot(page: Page, directory: Path, name: str) -> None:
    """The widget as drawn in this state (looked at once by eye; the asserts read the DOM)."""
    page.locator(".mailbus-monitor").first.screenshot(path=str(directory / f"{name}.png"))


def texts(page: Page, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def test_the_live_notebook_draws_the_monitor_in_each_state(
    jupyterlab: str, chromium_page: Page, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("MAILBUS_NOTEBOOK_SHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    page = chromium_page
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

    first = eventually(demo_topics, 30, "the demo's topics in the widget", longest_pause=POLL_S)
    eventually(
        lambda: topic_counts(page).get("robot/pose", 0) > first["robot/pose"],
        30,
        "robot/pose's count to grow",
        longest_pause=POLL_S,
    )
    # The tree: groups with their topics' sums; rates once a second was watched.
    pose = page.locator(".mailbus-monitor tr.mailbus-topic[data-topic='robot/pose']")
    robot = page.locator(".mailbus-monitor tr.mailbus-group[data-group='robot']")
    assert robot.locator("td").first.inner_text().strip() == "▾ robot/"
    eventually(
        lambda: pose.locator(".mailbus-rate").inner_text() not in (NO_VALUE, "0.0"),
        30,
        "robot/pose's rate",
        longest_pause=POLL_S,
    )
    assert 0 < float(pose.locator(".mailbus-rate").inner_text()) < 100
    footer = page.locator(".mailbus-status").first
    assert footer.inner_text().startswith("live: "), footer.inner_text()
    assert "events seen on" in footer.inner_text() and "update " not in footer.inner_text()
    assert page.locator(".mailbus-state").first.inner_text() == "● live"
    shot(page, shots, "1-live")

    # The filter narrows the tree as it is typed.
    page.locator(".mailbus-filter").first.fill("temp")
    eventually(
        lambda: set(topic_counts(page)) == {"sensors/temperature"},
        10,
        "the filtered tree",
        longest_pause=POLL_S,
    )
    shot(page, shots, "2-filtered")
    page.locator(".mailbus-filter").first.fill("")

    # The inspector: folded JSON, then the headers and the raw source.
    pose.click()
    title = page.locator(".mailbus-inspector-title").first
    pane = page.locator(".mailbus-monitor .mailbus-pane").first
    eventually(
        lambda: title.inner_text().startswith("robot/pose #") and "x: " in pane.inner_text(),
        30,
        "robot/pose's latest message, its JSON folded",
        longest_pause=POLL_S,
    )
    assert pane.locator("details").count() >= 1
    shot(page, shots, "3-inspector-json")
    page.locator(".mailbus-tab[data-tab='headers']").first.click()
    eventually(
        lambda: "Source-Timestamp" in pane.inner_text() or "no headers" in pane.inner_text(),
        10,
        "the headers",
        longest_pause=POLL_S,
    )
    page.locator(".mailbus-tab[data-tab='raw']").first.click()
    eventually(lambda: "no raw bytes" in pane.inner_text(), 10, "the raw tab", longest_pause=POLL_S)
    page.locator(".mailbus-tab[data-tab='json']").first.click()

    # A chart per watched field and one of rates: axes with ticks, legends whole.
    boxes = page.locator(".mailbus-monitor .mailbus-chart-box")
    eventually(lambda: boxes.count() == 3, 30, "three charts", longest_pause=POLL_S)
    assert texts(page, ".mailbus-chart-title") == [
        "robot/pose.x",
        "sensors/temperature.celsius",
        "messages per second",
    ]
    assert "robot/pose" in texts(page, ".mailbus-chart-box:nth-child(3) .mailbus-key")
    for i in range(3):
        box = boxes.nth(i)
        assert box.locator("text.mailbus-ytick").count() >= 2
        xticks = box.locator("text.mailbus-xtick").all_text_contents()
        assert "now" in xticks and "-10 s" in xticks, xticks
        assert box.locator("text.mailbus-axis-label").text_content() == "seconds before now"
    legend = boxes.nth(1).locator(".mailbus-key").first
    assert legend.inner_text() == "sensors/temperature.celsius"
    assert legend.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # not cut
    eventually(
        lambda: len((boxes.nth(0).locator("polyline").get_attribute("points") or "").split()) > 3,
        30,
        "a line of robot/pose.x",
        longest_pause=POLL_S,
    )
    chart = boxes.nth(0).locator("svg.mailbus-chart")
    # The chart is drawn again at each update: wait for one that is on the page.
    bounds = eventually(chart.bounding_box, 10, "the chart drawn", longest_pause=POLL_S)
    page.mouse.move(bounds["x"] + bounds["width"] * 0.9, bounds["y"] + bounds["height"] / 2)
    hover = boxes.nth(0).locator(".mailbus-hover")
    eventually(lambda: "robot/pose.x = " in hover.inner_text(), 10, "hover", longest_pause=POLL_S)
    shot(page, shots, "4-charts-hover")

    # The service calls: status, latency, the pair; a click shows both bodies.
    answered = page.locator(".mailbus-monitor tr.mailbus-call:has(.answered)").first
    answered.wait_for()
    assert float(answered.locator(".mailbus-latency").inner_text()) > 0
    answered.click()
    eventually(
        lambda: (
            title.inner_text().startswith("demo/add call #") and "In-Reply-To" in pane.inner_text()
        ),
        10,
        "the call's request and response",
        longest_pause=POLL_S,
    )
    shot(page, shots, "5-call")

    # Pause: what is shown stays, arrivals are counted and said.
    page.locator(".mailbus-pause").first.click()
    state = page.locator(".mailbus-state").first
    eventually(lambda: state.inner_text() == "❚❚ paused", 10, "paused")
    held = topic_counts(page)["robot/pose"]
    eventually(
        lambda: (
            footer.inner_text().startswith("paused at ")
            and int(footer.inner_text().split(": ")[1].split()[0]) > 5
        ),
        30,
        "arrivals counted while paused",
        longest_pause=POLL_S,
    )
    assert topic_counts(page)["robot/pose"] == held
    shot(page, shots, "6-paused")
    page.locator(".mailbus-pause").first.click()
    eventually(
        lambda: topic_counts(page)["robot/pose"] > held,
        30,
        "live again",
        longest_pause=POLL_S,
    )

    # Then the whole notebook (the monitor cell again, which replaces the first
    # monitor; a call, a ten-second recording, its analysis, the stop): the Altair
    # charts render through JupyterLab's own Vega renderer.
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    eventually(
        lambda: page.locator(".vega-embed canvas, .vega-embed svg").count() >= 2,
        90,
        "the notebook's Altair charts",
        longest_pause=POLL_S,
    )
    eventually(lambda: kernel_idle(jupyterlab), 60, "the notebook to finish", longest_pause=POLL_S)
    # Every code cell ran (the last ones assert on the live traffic), none failed.
    errors = page.locator("[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.all_inner_texts()
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
    assert prompts and all(p.strip() not in ("[ ]:", "[*]:") for p in prompts), prompts
    # The last cell stopped the monitor: it says so.
    eventually(lambda: state.inner_text() == "■ stopped", 30, "stopped", longest_pause=POLL_S)
    banner = page.locator(".mailbus-banner").first
    assert banner.is_visible() and "This monitor stopped at" in banner.inner_text()
    assert footer.inner_text().startswith("stopped: ")
    assert set(texts(page, ".mailbus-rate")) == {NO_VALUE}  # no rate claims to be live
    banner.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "7-stopped.png"))

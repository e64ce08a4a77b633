"""The monitor in JupyterLab (Debian's chromium, Playwright) with a long topic name, as a
user's plant names its topics: the tree keeps its count and rate columns in view, and each
chart keeps its title and legend inside its own box; and, from `mailbus notebook`, a page
reloaded shows the monitor again without running the cell."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Locator, Page
from test_browser import POLL_S, free_port, kernel_idle, lab, lab_env, topic_counts
from waiting import eventually

pytestmark = pytest.mark.slow
LONG = "plant/" + "very-long-segment-name-" * 4 + "sensor/temperature_celsius_reading"
CELLS = [
    "from mailbus.notebook import Monitor\n\n"
    f"LONG = {LONG!r}\n"
    'monitor = Monitor.demo(fields=["robot/pose.x", LONG + ".value"])\n'
    "monitor",
    "import time\n\nfor i in range(30):\n"
    '    monitor.publish(LONG, {"value": i})\n    time.sleep(0.05)',
]


# Each chart's title and legend keys that reach past their chart's box, and the charts
# that overlap the next one.
OUTSIDE_JS = """() => {
    const found = [];
    const boxes = [...document.querySelectorAll(".mailbus-monitor .mailbus-chart-box")];
    boxes.forEach((box, i) => {
        const b = box.getBoundingClientRect();
        for (const part of box.querySelectorAll(".mailbus-chart-title, .mailbus-key")) {
            const r = part.getBoundingClientRect();
            const cut = part.scrollWidth > part.clientWidth + 1;
            if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || cut)
                found.push(`chart ${i}: ${part.className} ${part.textContent.slice(0, 30)}`);
        }
        const next = boxes[i + 1];
        const n = next && next.getBoundingClientRect();
        if (n && n.top === b.top && n.left < b.right)
            found.push(`chart ${i} overlaps chart ${i + 1}`);
    });
    return found;
}"""


def write_notebook(path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    nbformat.write(notebook, path)


def box_of(locator: Locator) -> dict[str, float]:
    """The element's box once it is drawn: the monitor redraws its rows as counts come,
    and a row caught between two drawings has none (bounding_box() gives None)."""
    bounds: dict[str, float] = eventually(
        lambda: locator.bounding_box(timeout=5_000),
        30,
        f"{locator} drawn",
        longest_pause=POLL_S,
    )
    return bounds


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
    )


def run_all(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-CodeCell")
    eventually(lambda: kernel_idle(url), 60, "the kernel to be idle", longest_pause=POLL_S)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def test_a_long_topic_name_keeps_the_columns_in_view_and_the_charts_apart(
    chromium_page: Page, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "long.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    command = [
        *(sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}"),
        *(f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"),
        "--LabApp.news_url=None",
    ]
    page = chromium_page
    with lab(command, lab_env(tmp_path), port, token) as base:
        url = f"{base}/lab/tree/long.ipynb?token={token}"
        run_all(page, url)
        eventually(
            lambda: topic_counts(page).get(LONG, 0) >= 30,
            60,
            "the long topic's messages in the monitor",
            longest_pause=POLL_S,
        )
        # The tree: the long topic's count and rate are drawn inside the tree's box.
        tree_box = box_of(page.locator(".mailbus-monitor .mailbus-treebox").first)
        row = page.locator(f".mailbus-monitor tr.mailbus-topic[data-topic='{LONG}']").first
        for cell in (".mailbus-count", ".mailbus-rate"):
            assert inside(box_of(row.locator(cell)), tree_box), cell
        assert row.locator(".mailbus-name").get_attribute("title") == LONG  # whole on hover
        # The charts: each title and legend inside its own box, the boxes apart.
        boxes = page.locator(".mailbus-monitor .mailbus-chart-box")
        eventually(lambda: boxes.count() == 3, 30, "three charts", longest_pause=POLL_S)
        page.locator(f".mailbus-monitor tr.mailbus-topic[data-topic='{LONG}']").first.click()
        eventually(
            lambda: LONG in page.locator(".mailbus-chart-box:nth-child(3)").inner_text(),
            30,
            "the long topic's rate charted",
            longest_pause=POLL_S,
        )
        # Read in one go: the charts are drawn again a few times a second.
        outside = page.evaluate(OUTSIDE_JS)
        assert outside == [], outside


def test_a_page_reloaded_soon_after_the_cell_ran_shows_the_monitor_again(
    chromium_page: Page, tmp_path: Path
) -> None:
    """`mailbus notebook`, the cells run, the page reloaded (no save by hand): the monitor
    is drawn again, live, without running the cell (it stayed empty: the output was only
    in the page until JupyterLab's autosave, 120 s later)."""
    from test_browser_launch import notebook_command

    root = tmp_path / "root"
    root.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    env = lab_env(tmp_path, JUPYTER_TOKEN=token)
    page = chromium_page
    with lab(notebook_command(root, port), env, port, token) as base:
        page.on("dialog", lambda dialog: dialog.accept())  # "leave the page?" if unsaved
        url = f"{base}/lab/tree/mailbus-live.ipynb?token={token}"
        run_all(page, url)
        eventually(
            lambda: topic_counts(page).get("robot/pose", 0) > 0,
            60,
            "the monitor",
            longest_pause=POLL_S,
        )
        eventually(lambda: kernel_idle(url), 60, "the cells to finish", longest_pause=POLL_S)
        notebook = root / "mailbus-live.ipynb"
        eventually(
            lambda: "application/vnd.jupyter.widget-view+json" in notebook.read_text(),
            30,
            "the notebook saved by JupyterLab with the monitor's output",
            longest_pause=POLL_S,
        )
        page.reload()
        page.wait_for_selector(".jp-Notebook .jp-CodeCell")
        eventually(
            lambda: topic_counts(page).get("robot/pose", 0) > 0,
            60,
            "the monitor drawn again after the reload",
            longest_pause=POLL_S,
        )
        before = topic_counts(page)["robot/pose"]
        eventually(
            lambda: topic_counts(page)["robot/pose"] > before,
            30,
            "robot/pose still counting: live",
            longest_pause=POLL_S,
        )

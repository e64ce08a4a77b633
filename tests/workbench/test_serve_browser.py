"""`mailbus serve` in a real headless Chromium: the browser receives the topics view.

textual-serve draws on a canvas, so the test reads what reaches the page through the
Chrome DevTools protocol: the terminal frames the page receives over its websocket."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
import pytest

CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _chromium_installed() -> None:
    # The test command installs it (scripts/system-packages.txt): a missing browser is a
    # broken set-up, not a reason to skip.
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-system-packages")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


async def received_text(
    ws_url: str, page_url: str, needles: list[bytes], timeout: float, screenshot: Path
) -> bytes:
    """Navigate to `page_url` and collect websocket frames until all needles were seen."""
    seen = b""
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url) as ws:
        ids = iter(range(1, 1_000_000))

        async def send(method: str, **params: object) -> int:
            n = next(ids)
            await ws.send_str(json.dumps({"id": n, "method": method, "params": params}))
            return n

        await send("Network.enable")
        await send("Page.enable")
        await send("Page.navigate", url=page_url)
        deadline = time.monotonic() + timeout
        while not all(n in seen for n in needles):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                message = await ws.receive(timeout=remaining)
            except TimeoutError:
                break
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(message.data)
            if data.get("method") == "Network.webSocketFrameReceived":
                response = data["params"]["response"]
                payload = response["payloadData"]
                seen += base64.b64decode(payload) if response["opcode"] == 2 else payload.encode()
        shot = await send("Page.captureScreenshot", format="png")
        while time.monotonic() < deadline + 10:
            message = await ws.receive(timeout=10)
            data = json.loads(message.data)
            if data.get("id") == shot:
                screenshot.write_bytes(base64.b64decode(data["result"]["data"]))
                break
    return seen


def test_serve_renders_topics_view_in_chromium(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MAILBUS_WORKBENCH_DIR": str(tmp_path / "config")}
    server = subprocess.Popen(
        [sys.executable, "-m", "mailbus_workbench", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    profile = tmp_path / "chromium"
    browser = None
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until(lambda: http_ok(url), 30, "mailbus serve to answer")
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                "--window-size=1400,900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        active = profile / "DevToolsActivePort"
        wait_until(
            lambda: active.exists() and active.read_text().count("\n") >= 1,
            30,
            "chromium's DevTools port",
        )
        devtools_port = int(active.read_text().split()[0])

        def page_ws() -> str | None:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{devtools_port}/json/list", timeout=2
            ) as response:
                pages = [p for p in json.load(response) if p.get("type") == "page"]
            return pages[0]["webSocketDebuggerUrl"] if pages else None

        ws_url = wait_until(page_ws, 20, "a chromium page")
        shot = tmp_path / "served.png"
        seen = asyncio.run(
            received_text(ws_url, url, [b"Topics", b"Services", b"sensors"], 40, shot)
        )
        assert b"Topics" in seen, "the browser never received the workbench's tabs"
        assert b"Services" in seen
        assert b"sensors" in seen, "the topics tree did not render the demo's topics"
        assert shot.exists() and shot.stat().st_size > 1000
        if os.environ.get("MAILBUS_KEEP_SCREENSHOT"):
            shutil.copy(shot, os.environ["MAILBUS_KEEP_SCREENSHOT"])
    finally:
        if browser is not None:
            stop(browser)
        stop(server)

"""The report renders in a real headless Chromium (Debian ``chromium``, installed by scripts/svc-chromium.sh).

Two ways in:
- the plain ``chromium --headless --screenshot`` command line, as a user would run it;
- the DevTools protocol over a WebSocket (aiohttp), which also reports console errors, uncaught
  exceptions, failed resource loads (Log domain) and whether every <img> decoded.

A broken page (missing image, thrown error) must be caught by the same checks, so they are not vacuous.
The last test crawls a real testbed with ``crawlfleet crawl`` and builds the report from that crawl.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from PIL import Image

from pipeline.report import build_report
from pipeline.report.plots import PLOTS
from pipeline.report.sample import SampleSpec, write_sample_crawl

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--mute-audio",
)  # fmt: skip
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run scripts/svc-chromium.sh install (make test does)")
    return CHROMIUM


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("render")
    crawl = write_sample_crawl(base / "crawl", SampleSpec(seconds=20, pages_per_s=30))
    return build_report(crawl, base / "out").html


def assert_not_blank(png: bytes, *, min_colors: int = 50) -> Image.Image:
    assert png[:8] == PNG_MAGIC
    im = Image.open(io.BytesIO(png)).convert("RGB")
    colors = im.getcolors(maxcolors=1_000_000) or []
    assert len(colors) >= min_colors, f"screenshot looks blank: {len(colors)} colours"
    white = max((c for c in colors if c[1] == (255, 255, 255)), default=(0, None))[0]
    assert white < 0.97 * im.size[0] * im.size[1], "screenshot is nearly all white"
    return im


# --- the plain command line -------------------------------------------------------------------------
def test_cli_screenshot_is_not_blank_and_has_no_console_errors(chromium: str, sample_report: Path,
                                                              tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             f"--screenshot={shot}", "--window-size=1200,2000", sample_report.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == [], console
    assert_not_blank(shot.read_bytes())


# --- the DevTools protocol --------------------------------------------------------------------------
@dataclass
class PageCheck:
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    screenshot: bytes = b""

    @property
    def problems(self) -> list[str]:
        bad_imgs = [i["src"][:120] for i in self.images if not i["ok"]]
        return self.console_errors + self.exceptions + self.log_errors + [f"broken image {s}" for s in bad_imgs]


class Cdp:
    """A minimal DevTools client: one browser WebSocket, flat sessions, events collected by method."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.waiting:
                self.waiting.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
                   timeout: float = 60.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = fut
        await self.ws.send_str(json.dumps(msg))
        reply = await asyncio.wait_for(fut, timeout)
        assert "error" not in reply, reply
        return reply.get("result", {})

    async def wait_event(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.events:
                if ev["method"] == method:
                    return ev
            await asyncio.sleep(0.05)
        raise TimeoutError(method)


_IMAGES_JS = "JSON.stringify(Array.from(document.images).map(i => ({src: i.currentSrc || i.src, "\
             "ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, h: i.naturalHeight})))"


async def _check_page(chromium: str, url: str) -> PageCheck:
    with tempfile.TemporaryDirectory() as profile:
        proc = await asyncio.create_subprocess_exec(
            chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            ws_url = await asyncio.wait_for(_devtools_url(proc), 60)
            async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
                return await _drive(Cdp(ws), url)
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


async def _devtools_url(proc: asyncio.subprocess.Process) -> str:
    assert proc.stderr is not None
    while line := await proc.stderr.readline():
        m = re.search(rb"DevTools listening on (ws://\S+)", line)
        if m:
            return m.group(1).decode()
    raise RuntimeError("chromium exited before opening DevTools")


async def _drive(cdp: Cdp, url: str) -> PageCheck:
    target = await cdp.send("Target.createTarget", {"url": "about:blank"})
    attached = await cdp.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
    sid = attached["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        await cdp.send(f"{domain}.enable", session=sid)
    await cdp.send("Emulation.setDeviceMetricsOverride",
                   {"width": 1200, "height": 2000, "deviceScaleFactor": 1, "mobile": False}, session=sid)
    cdp.events.clear()
    await cdp.send("Page.navigate", {"url": url}, session=sid)
    await cdp.wait_event("Page.loadEventFired")
    check = PageCheck()
    res = await cdp.send("Runtime.evaluate", {"expression": _IMAGES_JS, "returnByValue": True}, session=sid)
    check.images = json.loads(res["result"]["value"])
    metrics = await cdp.send("Page.getLayoutMetrics", session=sid)
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    shot = await cdp.send("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": 1200, "height": min(size["height"], 12000), "scale": 1},
    }, session=sid)  # fmt: skip
    check.screenshot = base64.b64decode(shot["data"])
    for ev in cdp.events:
        p = ev.get("params", {})
        if ev["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            check.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif ev["method"] == "Runtime.exceptionThrown":
            details = p.get("exceptionDetails", {})
            check.exceptions.append(str(details.get("exception", {}).get("description") or details.get("text")))
        elif ev["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            check.log_errors.append(f"{p['entry'].get('text')} {p['entry'].get('url', '')}")
    await cdp.send("Browser.close")
    return check


def test_devtools_render_shows_every_plot_without_errors(chromium: str, sample_report: Path,
                                                         tmp_path: Path) -> None:
    check = asyncio.run(_check_page(chromium, sample_report.as_uri()))
    assert check.problems == []
    names = sorted(Path(i["src"]).name for i in check.images)
    assert names == sorted(name for name, *_ in PLOTS)
    assert all(i["w"] >= 600 and i["h"] >= 200 for i in check.images)
    im = assert_not_blank(check.screenshot)
    assert im.size[1] > 4000  # the whole page, all figures, was captured
    (tmp_path / "page.png").write_bytes(check.screenshot)


def test_devtools_checks_catch_a_broken_page(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><h1>broken</h1><img src='missing.png'>"
                    "<script>console.error('bad'); throw new Error('boom');</script></body></html>")
    check = asyncio.run(_check_page(chromium, page.as_uri()))
    assert any("bad" in e for e in check.console_errors)
    assert any("boom" in e for e in check.exceptions)
    assert any(not i["ok"] for i in check.images)


# --- a real crawl ------------------------------------------------------------------------------------
def test_report_from_a_real_testbed_crawl(chromium: str, make_testbed: Any, tmp_path: Path) -> None:
    pytest.importorskip("pipeline.embedded.cli", reason="the crawl engine has not landed")
    tb = make_testbed(hosts=6, pages=25, seed=3)
    out = tmp_path / "crawl"
    cmd = [sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out), "--no-progress",
           "--json", "--dns-server", tb.dns_server, "--max-pages", "400"]
    for ip in tb.ips:
        cmd += ["--allow-network", f"{ip}/32"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["pages_fetched"] > 0
    for name in ("stats.jsonl", "summary.json"):
        assert (out / name).is_file(), name
    assert list((out / "segments").glob("segment-*.jsonl"))

    report = build_report(out, tmp_path / "report")
    data = json.loads(report.json.read_text())
    assert data["rate"]["source"] == "stats.jsonl"
    assert data["totals"]["pages"] == summary["pages_fetched"]
    assert data["totals"]["failed"] == summary["pages_failed"]
    assert data["totals"]["hosts"] >= 6
    assert data["latency"]["phases"]["ttfb"]["n"] > 0
    for path in report.plots:
        assert path.read_bytes()[:8] == PNG_MAGIC
        with Image.open(path) as im:
            im.verify()
    check = asyncio.run(_check_page(chromium, report.html.as_uri()))
    assert check.problems == []
    assert len(check.images) == len(PLOTS) and all(i["ok"] for i in check.images)
    assert_not_blank(check.screenshot)
    (tmp_path / "real-page.png").write_bytes(check.screenshot)

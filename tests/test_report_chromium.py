"""The HTML report in headless Chromium: no console errors, charts visible, and no script runs from
hostile names in a recording (issue 5 and issue 7, "Privilege and safety").

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: fds 3 and 4,
NUL-separated JSON), so driving it needs nothing beyond the standard library (screenshots are decoded
with Pillow, which comes with matplotlib). Alert dialogs, console
messages, exceptions and log entries (CSP violations, failed loads) are all collected as events.
"""

from __future__ import annotations

import base64
import glob
import io
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from PIL import Image

from test_report_synth import make_projection, make_recording

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
# DPUPROF_FIXTURES: another glob of recordings to run these tests on (e.g. scratch recordings)
FIXTURES = sorted(Path(p) for p in glob.glob(os.environ.get("DPUPROF_FIXTURES",
                                                            str(ROOT / "fixtures/*/recording.rec"))))

pytestmark = [pytest.mark.chromium,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed "
                                 "(apt-get install -y chromium)")]

XSS_COMM = "<img src=x onerror=alert(1)>"
XSS_FRAME = "</script><script>alert(2)</script>"


class Chromium:
    """A headless Chromium with one page, driven over the DevTools pipe."""

    def __init__(self, timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="dpuprof-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--hide-scrollbars", "--mute-audio",
             f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(domain, session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=True)

    # -- protocol
    def _recv(self) -> dict:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def _event(self, msg: dict) -> None:
        self.events.append(msg)
        if msg.get("method") == "Page.javascriptDialogOpening":  # an alert() ran: record and dismiss
            self._send("Page.handleJavaScriptDialog", {"accept": True}, session=True)

    def _send(self, method: str, params=None, session=False) -> int:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        return self._id

    def call(self, method: str, params=None, session=False) -> dict:
        want = self._send(method, params, session)
        while True:
            msg = self._recv()
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self._event(msg)

    # -- page
    def load(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            msg = self._recv()
            if "method" in msg:
                self._event(msg)
        self.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")

    def evaluate(self, expr: str):
        res = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                        session=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self) -> bytes:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                         session=True)["data"]
        return base64.b64decode(data)

    def problems(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions, log errors (CSP, failed loads), dialogs."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: {p.get('args')}")
            elif m == "Runtime.exceptionThrown":
                out.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
            elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                out.append(f"log {p['entry'].get('source')}: {p['entry'].get('text')}")
            elif m == "Page.javascriptDialogOpening":
                out.append(f"dialog {p.get('type')}: {p.get('message')}")
        return out

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            shutil.rmtree(self.profile, ignore_errors=True)


def png_stats(png: bytes) -> tuple[int, int, int]:
    """(width, height, distinct colours over a sample: every 7th row, every 3rd pixel) of an 8-bit
    RGB(A) PNG. Decoded with Pillow (installed with matplotlib, which the report draws its charts
    with): the former pure-Python unfiltering of a full-page screenshot took seconds per call."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, ctype = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and ctype in (2, 6), (depth, ctype)  # RGB or RGBA
    with Image.open(io.BytesIO(png)) as img:
        assert img.size == (width, height)
        rgb = img.convert("RGB").tobytes()
    stride = width * 3
    colours = set()
    for y in range(0, height, 7):
        row = rgb[y * stride:(y + 1) * stride]
        colours.update(row[i:i + 3] for i in range(0, stride, 9))
    return width, height, len(colours)


@pytest.fixture(scope="module")
def browser():
    b = Chromium()
    yield b
    b.close()


def _report(tmp_path: Path, *recs: Path, args=()) -> Path:
    out = tmp_path / "report.html"
    res = subprocess.run([sys.executable, "-m", "dpuprof", "report", *map(str, recs), "-q", "-o", str(out), *args],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return out


def _check_page(browser: Chromium, page: Path, min_images: int = 3) -> dict:
    browser.load(page)
    assert browser.problems() == []
    info = browser.evaluate("""(() => {
        const box = el => { const r = el.getBoundingClientRect(); return [r.width, r.height]; };
        const imgs = [...document.querySelectorAll('figure img')];
        return {ready: document.documentElement.getAttribute('data-dpuprof-ready'),
                images: imgs.map(i => [i.naturalWidth, i.naturalHeight, ...box(i), i.complete]),
                svgs: [...document.querySelectorAll('svg.flame')].map(box),
                frames: document.querySelectorAll('svg.flame g.fg').length,
                tables: document.querySelectorAll('table').length,
                scripts: document.scripts.length,
                data: JSON.parse(document.getElementById('dpuprof-data').textContent).kind};
    })()""")
    assert info["ready"] == "1", "the report's own script did not run"
    assert len(info["images"]) >= min_images
    for nat_w, nat_h, w, h, complete in info["images"]:
        assert complete and nat_w > 100 and nat_h > 100 and w > 100 and h > 50, info["images"]
    for w, h in info["svgs"]:
        assert w > 300 and h > 40
    assert info["tables"] >= 2
    assert info["scripts"] == 2  # the JSON data block and the report's script, nothing injected
    shot = browser.screenshot()
    width, height, colours = png_stats(shot)
    assert width >= 1000 and height > 900 and colours > 20, (width, height, colours)
    info["screenshot"] = shot
    return info


def _one_recording(tmp_path: Path) -> Path:
    """A private copy of the first fixture (never the checkout's file), else a synthetic recording."""
    if FIXTURES:
        src, dst = FIXTURES[0], tmp_path / "fixture" / FIXTURES[0].name
        dst.parent.mkdir(exist_ok=True)
        shutil.copyfile(src, dst)
        return dst
    return make_recording(tmp_path / "synth.rec")


def test_html_report_renders_without_errors(browser, tmp_path):
    rec = tmp_path / "run.rec"
    shutil.copy(_one_recording(tmp_path), rec)
    make_projection(rec)
    info = _check_page(browser, _report(tmp_path, rec), min_images=5)
    assert info["data"] == "single" and info["frames"] > 3
    (tmp_path / "shot.png").write_bytes(info["screenshot"])


def test_flame_graph_zooms_on_click(browser, tmp_path):
    page = _report(tmp_path, _one_recording(tmp_path))
    browser.load(page)
    widths = browser.evaluate("""(() => {
        const svg = document.querySelector('svg.flame');
        const gs = [...svg.querySelectorAll('g.fg')].filter(g => g.getAttribute('data-d') === '2');
        gs.sort((a, b) => b.getAttribute('data-w') - a.getAttribute('data-w'));
        const g = gs[gs.length - 1], rect = g.querySelector('rect');
        const before = +rect.getAttribute('width');
        g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        return [before, +rect.getAttribute('width'), +svg.getAttribute('data-width')];
    })()""")
    before, after, full = widths
    assert after > before and abs(after - (full - 0.5)) < 1
    assert browser.problems() == []


def test_compare_and_merge_reports_render(browser, tmp_path):
    rec = _one_recording(tmp_path)
    info = _check_page(browser, _report(tmp_path, rec, rec, args=["--compare"]), min_images=4)
    assert info["data"] == "compare"
    info = _check_page(browser, _report(tmp_path, rec, rec, args=["--merge"]), min_images=4)
    assert info["data"] == "merge"


def _hostile_copy(src: Path, dst: Path) -> Path:
    """A copy of ``src`` whose process names and stack frames carry HTML/script injections."""
    shutil.copy(src, dst)
    db = sqlite3.connect(dst)
    with db:
        db.execute("UPDATE processes SET comm = ?", (XSS_COMM,))
        db.execute("UPDATE frames SET name = name || ?", (XSS_FRAME,))  # every frame of every stack
        db.execute("UPDATE meta SET value = ? WHERE key = 'host'", (json.dumps(XSS_COMM),))
    db.close()
    return dst


def test_hostile_names_render_as_text(browser, tmp_path):
    rec = _hostile_copy(_one_recording(tmp_path), tmp_path / "hostile.rec")
    page = _report(tmp_path, rec)
    html = page.read_text()
    assert XSS_COMM not in html and XSS_FRAME not in html  # escaped everywhere, JSON block included
    browser.load(page)
    assert browser.problems() == [], "a script, dialog or load was triggered by recording text"
    found = browser.evaluate(f"""(() => {{
        const text = document.body.innerText + [...document.querySelectorAll('svg title')]
            .map(t => t.textContent).join('\\n');
        return {{comm: text.includes({json.dumps(XSS_COMM)}),
                frame: text.includes({json.dumps(XSS_FRAME)}),
                injectedImgs: [...document.images].filter(i => !i.src.startsWith('data:image/png')).length,
                scripts: document.scripts.length,
                data: JSON.parse(document.getElementById('dpuprof-data').textContent).runs[0].host}};
    }})()""")
    assert found["comm"], "the hostile process name should appear literally as text"
    assert found["frame"], "the hostile frame should appear literally as text"
    assert found["injectedImgs"] == 0 and found["scripts"] == 2
    assert found["data"] == XSS_COMM  # the embedded JSON round-trips to the literal string

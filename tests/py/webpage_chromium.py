"""kiln's own web page (/kiln/) in headless Chromium (Debian's package), driven over the DevTools protocol: the page is
opened with a prompt, submits it, follows the websocket, and must show the generated image (loaded from /view,
non-zero natural size). A screenshot is saved.

usage: webpage_chromium.py KILN_URL TOKEN SCREENSHOT_PNG
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import websocket

kiln_url, token, shot = sys.argv[1], sys.argv[2], sys.argv[3]
browser = shutil.which("chromium") or shutil.which("chromium-browser")
if not browser:
    sys.exit("FAIL: chromium is not installed (scripts/install-deps.sh installs it)")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    dbg_port = s.getsockname()[1]
profile = tempfile.mkdtemp(prefix="kiln-chromium-")
proc = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         f"--remote-debugging-port={dbg_port}", f"--user-data-dir={profile}", "about:blank"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        try:
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{dbg_port}/json/list", timeout=2))
            page = next(t for t in targets if t["type"] == "page")
            break
        except (OSError, StopIteration, ValueError):
            time.sleep(0.1)
    else:
        sys.exit("FAIL: chromium did not start")
    ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30)
    seq = [0]

    def call(method, **params):
        seq[0] += 1
        ws.send(json.dumps({"id": seq[0], "method": method, "params": params}))
        while True:
            m = json.loads(ws.recv())
            if m.get("id") == seq[0]:
                if "error" in m:
                    raise RuntimeError(m["error"])
                return m["result"]

    def js(expr):
        return call("Runtime.evaluate", expression=expr, returnByValue=True)["result"].get("value")

    q = urllib.parse.urlencode({"prompt": "a lighthouse at dusk", "auto": 1, "w": 64, "h": 64, "steps": 1,
                                "seed": 5, "token": token})
    call("Page.navigate", url=f"{kiln_url}/kiln/?{q}")
    deadline = time.time() + 300
    state = None
    while time.time() < deadline:
        state = js("document.body && document.body.dataset.state")
        if state == "shown":
            break
        time.sleep(0.25)
    status = js("document.getElementById('status') && document.getElementById('status').textContent")
    if state != "shown":
        sys.exit(f"FAIL: the image was never shown (status: {status!r})")
    # the <img> must actually load from /view
    for _ in range(100):
        w = js("(() => { const i = document.querySelector('#gallery img'); return i && i.complete ? i.naturalWidth : 0 })()")
        if w:
            break
        time.sleep(0.1)
    if w != 64:
        sys.exit(f"FAIL: gallery image natural width {w}, want 64")
    src = js("document.querySelector('#gallery img').src")
    png = base64.b64decode(call("Page.captureScreenshot", format="png")["data"])
    with open(shot, "wb") as f:
        f.write(png)
    print(f"webpage: image shown ({src}), status {status!r}, screenshot {shot} ({len(png)} bytes)")
finally:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(profile, ignore_errors=True)

"""cdp_browser.py - headless Chromium (Debian's package) driven over the DevTools protocol, for the web tests:
start it, evaluate JavaScript, wait for a condition, take screenshots, collect console errors and exceptions."""
import base64, json, shutil, socket, subprocess, sys, tempfile, time, urllib.request
import websocket

class Browser:
    def __init__(self):
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        self.profile = tempfile.mkdtemp(prefix="kiln-chromium-")
        self.proc = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1400,900", f"--remote-debugging-port={port}", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                t = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2))
                page = next(x for x in t if x["type"] == "page"); break
            except (OSError, StopIteration, ValueError):
                time.sleep(0.1)
        else:
            raise SystemExit("FAIL: chromium did not start")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120)
        self.seq = 0
        self.events = []
    def call(self, method, **params):
        self.seq += 1
        self.ws.send(json.dumps({"id": self.seq, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.seq:
                if "error" in m: raise RuntimeError(m["error"])
                return m["result"]
            if "method" in m: self.events.append(m)
    def js(self, expr, await_promise=False):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in r: raise RuntimeError(json.dumps(r["exceptionDetails"])[:2000])
        return r["result"].get("value")
    def wait(self, expr, timeout=60, what=None):
        t = time.time()
        while time.time() - t < timeout:
            try:
                v = self.js(expr)
                if v: return v
            except RuntimeError:
                pass
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what or expr}")
    def shot(self, path):
        open(path, "wb").write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
    def errors(self):
        out = []
        for m in self.events:
            if m["method"] == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(m["params"]["exceptionDetails"])[:500])
            elif m["method"] == "Runtime.consoleAPICalled" and m["params"]["type"] in ("error", "assert"):
                out.append("console.error: " + json.dumps([a.get("value", a.get("description")) for a in m["params"]["args"]])[:500])
            elif m["method"] == "Log.entryAdded" and m["params"]["entry"]["level"] == "error":
                e = m["params"]["entry"]; out.append(f"log: {e.get('text')} {e.get('url','')}")
        return out
    def close(self):
        self.proc.terminate()
        try: self.proc.wait(10)
        except subprocess.TimeoutExpired: self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

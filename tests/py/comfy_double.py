#!/usr/bin/env python3
"""comfy_double.py - a scripted ComfyUI-API test double for `kiln bench` (standard library only).

It speaks the routes the harness uses (shared/spec/server-api.md section 1): POST /prompt, GET /history/{id},
GET /view, GET /system_stats, plus GET /debug/pixels?filename= (the sha256 of the raw RGB8 pixels it encoded,
so a test can check kiln's decoded-pixel digest). "Execution" sleeps --exec-ms per image in a worker thread and
writes deterministic PNGs: the pixels depend only on the prompt text, the seed and the image index, so equal
inputs give equal pixels (the A/B "identical outputs" case). Stamps in /history are integer milliseconds.

Used by tests/cli/bench_http.sh while `kiln serve` is not there to drive end to end.
    python3 comfy_double.py --port-file FILE [--exec-ms 30] [--fail-prompts N]
"""
import argparse, hashlib, http.server, json, queue, struct, threading, time, urllib.parse, uuid, zlib

IMAGES = {}    # filename -> png bytes
PIXELS = {}    # filename -> sha256 of RGB8 pixels
HISTORY = {}   # prompt_id -> history entry
WORK = queue.Queue()
COUNTER = [0]
ARGS = None


def png(width, height, rgb):
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + rgb[y * width * 3:(y + 1) * width * 3] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def pixels(text, seed, index, width, height):
    h = hashlib.sha256(f"{text}|{seed + index}{ARGS.pixel_salt}".encode()).digest()
    out = bytearray(width * height * 3)
    for i in range(width * height):
        out[3 * i:3 * i + 3] = bytes((h[i % 32], h[(i * 7) % 32], (i * 13 + h[0]) & 255))
    return bytes(out)


def worker():
    while True:
        pid, graph = WORK.get()
        start = int(time.time() * 1000)
        nodes = graph.values()
        text = next((n["inputs"].get("text", "") for n in nodes if n.get("class_type") == "CLIPTextEncode"), "")
        seed = next((n["inputs"].get("noise_seed", 0) for n in nodes if n.get("class_type") == "RandomNoise"), 0)
        lat = next((n["inputs"] for n in nodes if n.get("class_type") in ("EmptyFlux2LatentImage", "EmptyLatentImage")), {})
        batch = int(lat.get("batch_size", 1))
        # Small images keep the test fast; the size is not what the harness measures here.
        w, h = 32, 32
        save_id, save = next((k, n) for k, n in graph.items() if n.get("class_type") == "SaveImage")
        prefix = save["inputs"].get("filename_prefix", "ComfyUI")
        sub, _, base = prefix.rpartition("/")
        time.sleep(ARGS.exec_ms * batch / 1000.0)
        images = []
        for i in range(batch):
            COUNTER[0] += 1
            fn = f"{base}_{COUNTER[0]:05d}_.png"
            rgb = pixels(text, seed, i, w, h)
            IMAGES[(sub, fn)] = png(w, h, rgb)
            PIXELS[fn] = hashlib.sha256(rgb).hexdigest()
            images.append({"filename": fn, "subfolder": sub, "type": "output"})
        done = int(time.time() * 1000)
        HISTORY[pid] = {"prompt": [0, pid, graph, {}, [save_id]],
                        "outputs": {save_id: {"images": images}},
                        "status": {"status_str": "success", "completed": True,
                                   "messages": [["execution_start", {"prompt_id": pid, "timestamp": start}],
                                                ["execution_cached", {"prompt_id": pid, "timestamp": start, "nodes": []}],
                                                ["execution_success", {"prompt_id": pid, "timestamp": done}]]}}


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self, code, obj=None, raw=None, ctype="application/json"):
        data = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if url.path not in ("/prompt", "/api/prompt"):
            return self.answer(404, {"error": {"message": "no route"}})
        try:
            graph = json.loads(body)["prompt"]
            assert isinstance(graph, dict) and any(n.get("class_type") == "SaveImage" for n in graph.values())
        except Exception:
            return self.answer(400, {"error": {"type": "prompt_no_outputs", "message": "Prompt has no outputs",
                                               "details": "", "extra_info": {}}, "node_errors": {}})
        if ARGS.fail_prompts > 0:
            ARGS.fail_prompts -= 1
            return self.answer(400, {"error": {"type": "value_not_in_list", "message": "scripted failure",
                                               "details": "", "extra_info": {}}, "node_errors": {}})
        pid = str(uuid.uuid4())
        if ARGS.evil == "no-prompt-id":
            return self.answer(200, {"number": 1, "node_errors": {}})
        if ARGS.evil == "not-json":
            return self.answer(200, raw=b"<html>hello</html>", ctype="text/html")
        if ARGS.evil == "huge-json":
            return self.answer(200, raw=b'{"prompt_id": "' + b"x" * (17 << 20) + b'"}')
        WORK.put((pid, graph))
        self.answer(200, {"prompt_id": pid, "number": WORK.qsize(), "node_errors": {}})

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        path = url.path[4:] if url.path.startswith("/api/") else url.path
        if path.startswith("/history/"):
            pid = path[len("/history/"):]
            if ARGS.evil == "never-done" or pid not in HISTORY:
                return self.answer(200, {})
            entry = json.loads(json.dumps(HISTORY[pid]))
            if ARGS.evil == "no-images":
                entry["outputs"] = {}
            if ARGS.evil == "exec-error":
                entry["status"]["status_str"] = "error"
            return self.answer(200, {pid: entry})
        if path == "/view":
            key = (q.get("subfolder", [""])[0], q.get("filename", [""])[0])
            if key not in IMAGES or ARGS.evil == "view-404":
                return self.answer(404, {"error": {"message": "not found"}})
            if ARGS.evil == "bad-png":
                return self.answer(200, raw=b"\x89PNG\r\n\x1a\nthis is not a png at all", ctype="image/png")
            return self.answer(200, raw=IMAGES[key], ctype="image/png")
        if path == "/debug/pixels":
            fn = q.get("filename", [""])[0]
            return self.answer(200, {"sha256": PIXELS.get(fn)})
        if path == "/system_stats":
            return self.answer(200, {"system": {"os": "posix", "comfyui_version": "test-double"},
                                     "devices": [{"name": "cpu", "type": "cpu", "index": 0, "vram_total": 0,
                                                  "vram_free": 0, "torch_vram_total": 0, "torch_vram_free": 0}]})
        self.answer(404, {"error": {"message": "no route"}})


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--exec-ms", type=float, default=30)
    ap.add_argument("--fail-prompts", type=int, default=0)
    ap.add_argument("--pixel-salt", default="", help="changes every image (a lossy build in an A/B test)")
    ap.add_argument("--evil", default="", choices=["", "no-prompt-id", "not-json", "no-images", "bad-png", "view-404",
                                                   "exec-error", "never-done", "huge-json"],
                    help="answer one route wrongly, to test that the harness reports it cleanly")
    ARGS = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=worker, daemon=True).start()
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()

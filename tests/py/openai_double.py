#!/usr/bin/env python3
"""openai_double.py - an OpenAI-images API test double for `kiln bench serve` (standard library only).

POST /v1/images/generations answers like the OpenAI images API ({"created", "data": [{"b64_json"}]}) after a
fixed service time, with --workers requests served at once (the rest wait for a worker, as on a server with one
GPU), so the latency a load generator measures is predictable: with 200 ms service and one worker, a run above
5 requests/s must queue. A request without a prompt, or with a bad size, gets a 400 in the API's error shape.
--fail-every N answers every N-th generation with a 500 (after its service time). GET /debug/served returns how
many generations it served.
    python3 openai_double.py --port-file FILE [--service-ms 200] [--workers 1] [--fail-every N]
"""
import argparse, base64, http.server, json, struct, threading, time, zlib

ARGS = None
SLOTS = None
SERVED = [0]
LOCK = threading.Lock()


def png(width, height):
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes((x * 7 + y) & 255 for x in range(width * 3)) for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def bad(self, param, msg):
        self.answer(400, {"error": {"message": msg, "type": "invalid_request_error", "param": param, "code": None}})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/images/generations":
            return self.answer(404, {"error": {"message": "no route", "type": "invalid_request_error"}})
        try:
            req = json.loads(body)
        except ValueError:
            return self.bad(None, "the body is not JSON")
        if not isinstance(req.get("prompt"), str) or not req["prompt"]:
            return self.bad("prompt", "prompt must be a non-empty string")
        try:
            w, h = (int(v) for v in req.get("size", "1024x1024").split("x"))
        except ValueError:
            return self.bad("size", "size must be WIDTHxHEIGHT")
        with SLOTS:  # a worker: the service time is spent holding one
            time.sleep(ARGS.service_ms / 1000.0)
            with LOCK:
                SERVED[0] += 1
                failed = ARGS.fail_every > 0 and SERVED[0] % ARGS.fail_every == 0
        if failed:
            return self.answer(500, {"error": {"message": "scripted failure", "type": "server_error", "param": None,
                                               "code": "generation_failed"}})
        small = png(min(w, 16), min(h, 16))  # the bytes are not what the load generator measures
        self.answer(200, {"created": int(time.time()), "data": [{"b64_json": base64.b64encode(small).decode()}]})

    def do_GET(self):
        if self.path == "/debug/served":
            return self.answer(200, {"served": SERVED[0]})
        self.answer(404, {"error": {"message": "no route", "type": "invalid_request_error"}})


def main():
    global ARGS, SLOTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--service-ms", type=float, default=200)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--fail-every", type=int, default=0, help="answer every N-th generation with a 500")
    ARGS = ap.parse_args()
    SLOTS = threading.Semaphore(ARGS.workers)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.request_queue_size = 256
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()

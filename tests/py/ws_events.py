"""Follows `kiln serve`'s /ws across a kill -9 and restart and records every execution_start with the server
lifetime it came from (0 = the first server, 1 = the one started after it died, ...), so a test can count how
often each job really started: /history alone cannot tell, a re-run overwrites it.

A new lifetime begins only after a connection attempt was refused (the old server is gone); a connection that
merely drops and reconnects at once stays in the same lifetime. The base URL is read from URL_FILE at every
(re)connect, since the restarted server listens on a new port.

usage: ws_events.py URL_FILE CLIENT_ID OUT_FILE STOP_FILE
  writes "connected <life>" once per connection and "start <life> <prompt_id>" per execution_start to OUT_FILE
  (line-buffered), until STOP_FILE exists.
"""
import json
import os
import sys
import threading
import time

import websocket


def follow(url_file, client_id, on_line, stop):
    """Calls on_line("connected <life>") and on_line("start <life> <prompt_id>") until stop() is true."""
    life, refused, ws = 0, False, None
    while not stop():
        if ws is None:
            try:
                with open(url_file) as f:
                    base = f.read().strip()
                ws = websocket.create_connection(f"{base.replace('http', 'ws', 1)}/ws?clientId={client_id}",
                                                 timeout=0.5)
            except (OSError, ValueError, websocket.WebSocketException):  # ValueError: no URL in the file yet
                refused, ws = True, None
                time.sleep(0.02)
                continue
            if refused:
                life, refused = life + 1, False
            on_line(f"connected {life}")
        try:
            msg = ws.recv()
        except websocket.WebSocketTimeoutException:
            continue
        except (OSError, websocket.WebSocketException):
            ws.close()
            ws = None
            continue
        if not msg:  # closed by the server
            ws.close()
            ws = None
            continue
        try:
            m = json.loads(msg)
        except (TypeError, ValueError):
            continue
        if m.get("type") == "execution_start":
            on_line(f"start {life} {m['data']['prompt_id']}")
    if ws is not None:
        ws.close()


def counts(lines):
    """{(life, prompt_id): number of execution_start} from follow()'s lines."""
    c = {}
    for line in lines:
        p = line.split()
        if p[0] == "start":
            c[(int(p[1]), p[2])] = c.get((int(p[1]), p[2]), 0) + 1
    return c


if __name__ == "__main__":
    url_file, client_id, out_file, stop_file = sys.argv[1:5]
    lock = threading.Lock()
    with open(out_file, "w", buffering=1) as out:
        def write(line):
            with lock:
                out.write(line + "\n")
        follow(url_file, client_id, write, lambda: os.path.exists(stop_file))

"""Load: N concurrent clients submit and poll `kiln serve` for D seconds; half-way the driver (serve_load.sh)
kills the server with SIGKILL and restarts it. Clients choose their own prompt ids, so a submit whose reply was
lost in the crash is retried safely (the second try answers "already exists"). At the end every accepted job must
have completed exactly once, the history must hold no job nobody submitted, and the server's memory must be flat.

usage: load_serve.py URL_FILE CLIENTS SECONDS KILL_FILE
  URL_FILE   holds the current base URL (rewritten by the driver after the restart)
  KILL_FILE  created by this script at SECONDS/2 to ask the driver for the kill -9 + restart
"""
import json
import os
import sys
import threading
import time
import uuid

import requests

url_file, n_clients, seconds, kill_file = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
src = os.environ["KILN_SOURCE_DIR"]
with open(os.path.join(src, "tests/data/graphs/flux2_klein_t2i_template_api.json")) as f:
    GRAPH = json.load(f)
GRAPH["75:66"]["inputs"].update(width=64, height=64)
GRAPH["75:62"]["inputs"].update(width=64, height=64, steps=1)


def base():
    with open(url_file) as f:
        return f.read().strip()


accepted, lock = set(), threading.Lock()
errors = []
deadline = time.time() + seconds


def submit(pid, i):
    g = json.loads(json.dumps(GRAPH))
    g["75:73"]["inputs"]["noise_seed"] = i
    g["9"]["inputs"]["filename_prefix"] = "load/c"
    while time.time() < deadline + 30:
        try:
            r = requests.post(f"{base()}/prompt", json={"prompt": g, "prompt_id": pid}, timeout=30)
        except requests.RequestException:
            time.sleep(0.2)  # the server is restarting: retry with the same id
            continue
        if r.status_code == 200 or (r.status_code == 400 and "already exists" in r.text):
            return True
        if r.status_code == 429:
            return False  # queue full: not accepted
        errors.append(f"submit {r.status_code}: {r.text[:200]}")
        return False
    return False


def client(k):
    i = 0
    while time.time() < deadline:
        pid = str(uuid.uuid4())
        if submit(pid, k * 100000 + i):
            with lock:
                accepted.add(pid)
        i += 1
        while time.time() < deadline:  # poll until done
            try:
                h = requests.get(f"{base()}/history/{pid}", timeout=30).json()
                requests.get(f"{base()}/queue", timeout=30)
                if h:
                    break
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.2)


threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
for t in threads:
    t.start()
time.sleep(seconds / 2)
open(kill_file, "w").close()
for t in threads:
    t.join()

# drain: every accepted job must finish
t0 = time.time()
while True:
    try:
        q = requests.get(f"{base()}/queue", timeout=30).json()
        if not q["queue_running"] and not q["queue_pending"]:
            break
    except (requests.RequestException, ValueError):
        pass
    if time.time() - t0 > 900:
        sys.exit("FAIL: the queue did not drain")
    time.sleep(0.5)
hist = requests.get(f"{base()}/history", timeout=60).json()
lost = [p for p in accepted if p not in hist]
extra = [p for p in hist if p not in accepted]
failed = [p for p in accepted if p in hist and hist[p]["status"]["status_str"] != "success"]
dup = [p for p in accepted if p in hist and
       [m[0] for m in hist[p]["status"]["messages"]].count("execution_success") != 1]
print(f"load: {n_clients} clients, {seconds:.0f} s, {len(accepted)} accepted, {len(hist)} in history, "
      f"lost {len(lost)}, unknown {len(extra)}, failed {len(failed)}, duplicated {len(dup)}, errors {len(errors)}")
if errors:
    print("\n".join(errors[:5]))
if lost or extra or failed or dup or errors or not accepted:
    sys.exit("FAIL")
print("load: ok")

"""Load: N concurrent clients submit and poll `kiln serve` for D seconds; half-way the driver (serve_load.sh)
kills the server with SIGKILL and restarts it. Clients choose their own prompt ids, so a submit whose reply was
lost in the crash is retried safely (the second try answers "already exists"). At the end every accepted job must
have completed exactly once, the history must hold no job nobody submitted, and the server's memory must be flat.

"Exactly once" is counted where a re-run would show, not only in /history (a re-run overwrites its entry):
- output files: one per accepted job (the one its history names); a file no job names is allowed only for a job
  that was running at the crash (killed after its image was saved, before its finish was committed);
- the job store (SQLite, read with store_jobs.py): a job that had succeeded at the crash keeps its claim count
  and finish time, one that was running is claimed once more, every other job exactly once;
- execution_start on /ws (ws_events.py): never twice for a job in one server lifetime, and never after the
  restart for a job that had succeeded before it.

usage: load_serve.py URL_FILE CLIENTS SECONDS KILL_FILE OUTPUT_DIR AT_CRASH_JSON
  URL_FILE       holds the current base URL (rewritten by the driver after the restart)
  KILL_FILE      created by this script at SECONDS/2 to ask the driver for the kill -9 + restart
  OUTPUT_DIR     the server's --output (images under load/); the job store is $KILN_STORE, else ../user/kiln-jobs.sqlite
  AT_CRASH_JSON  store_jobs.py's snapshot of the store, written by the driver between the kill and the restart
"""
import json
import os
import sys
import threading
import time
import uuid

import requests

import store_jobs
import ws_events

url_file, n_clients, seconds, kill_file = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
out_dir, at_crash_file = sys.argv[5], sys.argv[6]
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


ws_lines, ws_done = [], threading.Event()
follower = threading.Thread(target=ws_events.follow,
                            args=(url_file, "load-observer", ws_lines.append, ws_done.is_set))  # sees every job
follower.start()
while not ws_lines and follower.is_alive():
    time.sleep(0.05)
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
ws_done.set()
follower.join()

# output files: the one each job's history names, distinct, on disk; others only from a run killed after saving
at_crash = json.load(open(at_crash_file))
final = store_jobs.read(os.environ.get("KILN_STORE") or os.path.join(os.path.dirname(out_dir), "user", "kiln-jobs.sqlite"))
running_at_crash = [p for p, j in at_crash.items() if j["state"] == "running"]
named = [i["subfolder"] + "/" + i["filename"] for p in accepted if p in hist
         for i in hist[p].get("outputs", {}).get("9", {}).get("images", [])]
on_disk = set("load/" + f for f in os.listdir(os.path.join(out_dir, "load")) if f.endswith(".png"))
orphans = on_disk - set(named)
bad_files = (len(named) != len(accepted) or len(set(named)) != len(named) or not set(named) <= on_disk
             or len(orphans) > len(running_at_crash))
# the store: claims (QUEUED -> RUNNING) per job against the snapshot taken at the crash
bad_store = []
for p in accepted:
    f, c = final.get(p), at_crash.get(p)
    if f is None or f["state"] != "succeeded":
        bad_store.append((p, c, f))
    elif c and c["state"] == "succeeded":
        if f["attempts"] != c["attempts"] or f["finished_ms"] != c["finished_ms"]:
            bad_store.append((p, c, f))
    elif f["attempts"] != (c["attempts"] + 1 if c and c["state"] == "running" else 1):
        bad_store.append((p, c, f))
unknown_in_store = [p for p in final if p not in accepted]
# execution_start per server lifetime
starts = ws_events.counts(ws_lines)
bad_ws = [k for k, n in starts.items() if n > 1 or k[0] not in (0, 1) or k[1] not in accepted or
          (k[0] == 1 and at_crash.get(k[1], {}).get("state") == "succeeded")]
followed = "connected 1" in ws_lines and any(life == 1 for life, _ in starts)
claims = sum(j["attempts"] for j in final.values())
print(f"load: {n_clients} clients, {seconds:.0f} s, {len(accepted)} accepted, {len(hist)} in history, "
      f"lost {len(lost)}, unknown {len(extra)}, failed {len(failed)}, duplicated {len(dup)}, errors {len(errors)}")
print(f"load: at the crash {sum(j['state'] == 'succeeded' for j in at_crash.values())} succeeded, "
      f"{len(running_at_crash)} running; {len(on_disk)} output files ({len(orphans)} from a killed run), "
      f"{claims} claims in the store, {sum(starts.values())} execution_start seen "
      f"({sum(n for (l, _), n in starts.items() if l == 1)} after the restart)")
if errors:
    print("\n".join(errors[:5]))
for what, bad in (("output files", bad_files), ("store", bad_store[:5]), ("unknown jobs in the store", unknown_in_store[:5]),
                  ("execution_start", bad_ws[:5]), ("ws follower lost the restarted server", not followed)):
    if bad:
        print(f"FAIL {what}: {bad}")
if lost or extra or failed or dup or errors or not accepted or bad_files or bad_store or unknown_in_store or bad_ws \
        or not followed:
    sys.exit("FAIL")
print("load: ok")
